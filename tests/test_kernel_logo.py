"""The kernel's logo: the kernelspec ``iac-kernel install`` writes carries it (launcher icon)."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path

from iac_kernel.kernel.app import LOGOS, write_spec


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_write_spec_puts_the_logos_beside_kernel_json(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "iac-kernel")
    names = sorted(p.name for p in spec.parent.iterdir())
    assert names == sorted(["kernel.json", *LOGOS])
    assert png_size((spec.parent / "logo-32x32.png").read_bytes()) == (32, 32)
    assert png_size((spec.parent / "logo-64x64.png").read_bytes()) == (64, 64)
    svg = ET.fromstring((spec.parent / "logo-svg.svg").read_text())
    assert svg.tag.endswith("svg") and svg.get("viewBox") == "0 0 64 64"


def test_jupyter_server_lists_the_logos_for_the_launcher(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_server.services.kernelspecs.handlers import kernelspec_model

    write_spec(tmp_path / "kernels" / "iac-kernel")
    spec = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]).get_all_specs()
    found = spec["iac-kernel"]
    model = kernelspec_model(
        SimpleNamespace(base_url="/"), "iac-kernel", found["spec"], found["resource_dir"]
    )
    assert model["resources"]["logo-64x64"] == "/kernelspecs/iac-kernel/logo-64x64.png"
    assert {"logo-32x32", "logo-64x64", "logo-svg"} <= set(model["resources"])
