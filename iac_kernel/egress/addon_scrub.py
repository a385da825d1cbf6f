"""mitmdump addon, after the broker's (``addon_broker``): every answer the proxy sees, from
any host, leaves with no real value of the broker's current table in it (its obtained
credentials too): headers, trailers, the reason phrase, bodies (decoded; streamed ones
chunk by chunk), WebSocket and TCP messages from servers. Imports stdlib and mitmproxy
(and its brotli and zstandard) only.

A value is found raw or as URL, JSON, XML or HTML text writes it (each byte literal or
escaped, any mix), as base64 (standard or URL-safe, at each of the three offsets inside a
longer run) and as hex (plain or byte-spaced, as S3's signature errors echo canonical
requests). A text form becomes the placeholder written the same way (the sandbox sees
what it already holds); base64 and hex become a fixed marker of the same length. One
regex of every form is built per table and runs only around "needles" found (pieces
every match of a form holds): long needles are found in one pass over the text's 8-byte
words at a fixed stride (a set lookup each), short ones by a search each, so an answer
with no value costs about one pass whatever the table's size.
"""

from __future__ import annotations

import base64
import html
import re
import sys
import zlib
from urllib.parse import quote, quote_plus

from mitmproxy import ctx, http, tcp

#: A real value shorter than this is scrubbed only where it is a whole header value,
#: body or message (the broker's own substitution rule): shorter strings occur by chance.
_SCRUB_MIN = 8
#: What stands for a base64 or text form that cannot carry the placeholder (cycled).
_MARKER = b"REDACTED"
_NEEDLE_MAX = 72
#: A needle of ``stride + 7`` bytes or more holds one of the 8-byte words at every
#: ``stride``-th offset of any text it is in: such needles are looked for in one pass
#: over those words (a set lookup each), shorter ones by a search of their own (one pass
#: each). The stride is chosen per table by the cost of each pass, counted in searches
#: (measured: a lookup costs about what a search spends on 30 bytes).
_WORD_PASS = {16: 8, 32: 4, 64: 2}
#: A needle this long is sampled at a stride of 32 (preferred over a shorter one).
_SAMPLED = 32 + 7
#: Below this size a text is searched needle by needle.
_SMALL = 4096
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ENTITY = {ord("&"): b"amp", ord("<"): b"lt", ord(">"): b"gt", ord('"'): b"quot", ord("'"): b"apos"}
#: Bytes of escapes and of the base64 and hex alphabets: with the values' own bytes, all
#: a match can hold (a streamed tail without them cannot be the start of one).
_FORM_BYTES = frozenset(_UNRESERVED | set(b"%\\/&#;+_ "))
_PERCENT = re.compile(rb"%[0-9A-F]{2}")


def _hex_either(byte: int) -> bytes:
    """A regex of ``byte``'s two hex digits, in either case."""
    return b"".join(
        d.encode() if d.isdigit() else f"[{d}{d.upper()}]".encode() for d in f"{byte:02x}"
    )


def _byte_forms(byte: int) -> tuple[bytes, int]:
    """(a regex of one byte of a value as text writes it, the longest such writing)."""
    literal = re.escape(bytes([byte]))
    if byte in _UNRESERVED:
        return literal, 1
    forms = [literal, b"%" + _hex_either(byte)]
    if byte == 0x20:
        forms.append(rb"\+")
    if byte in b'/"\\':
        forms.append(rb"\\" + literal)
    if byte < 0x80:
        forms += [
            rb"\\u00" + _hex_either(byte),
            b"&#%d;" % byte,
            b"&#[xX]" + _hex_either(byte) + b";",
        ]
    if byte in _ENTITY:
        forms.append(b"&" + _ENTITY[byte] + b";")
    return b"(?:" + b"|".join(forms) + b")", 6


def _b64_cores(real: bytes) -> list[bytes]:
    """The standard base64 characters only ``real`` decides, at each offset (0, 1, 2
    bytes into a 3-byte group) it can start at inside a longer base64 run."""
    cores = []
    for lead in range(3):
        text = base64.b64encode(bytes(lead) + real + bytes(2))
        cores.append(text[-(-8 * lead // 6) : 8 * (lead + len(real)) // 6])
    return cores


def _longest_run(text: bytes, allowed: frozenset[int]) -> bytes:
    runs = re.findall(b"[" + re.escape(bytes(sorted(allowed))) + b"]+", text)
    return max(runs, key=len, default=b"")


def _needles(run: bytes, whole: list[bytes]) -> set[bytes]:
    """Pieces every match of a form holds: ``run`` (a part every writing of it keeps)
    when it is long enough to be sampled, or when the ``whole`` writings are not either;
    else each whole writing (a mix of writings is then not looked for)."""
    shortest = min(len(w) for w in whole)
    if len(run) >= _SAMPLED or (len(run) >= _SCRUB_MIN and shortest < _SAMPLED):
        return {run[:_NEEDLE_MAX]}
    return {w[:_NEEDLE_MAX] for w in whole}


class _Scrubber:
    """The real values of one table in every form an answer may carry them (see above)."""

    def __init__(self, pairs: dict[bytes, bytes], stride: int | None = None) -> None:
        #: real -> placeholder, for values too short to look for inside a text
        self.exact = {r: f for r, f in pairs.items() if len(r) < _SCRUB_MIN}
        self._exact_max = _SCRUB_MIN + 64  # surrounding white space included
        #: group number -> (kind, real, placeholder)
        self.kinds: list[tuple[str, bytes, bytes]] = [("", b"", b"")]
        self.needles: set[bytes] = set()
        self._tokens: dict[bytes, re.Pattern[bytes]] = {}
        alternatives, longest, inner = [], 1, set(_FORM_BYTES)
        for real, fake in sorted(pairs.items(), key=lambda kv: -len(kv[0])):
            if len(real) < _SCRUB_MIN:
                continue
            inner |= set(real)
            forms = [_byte_forms(b) for b in real]
            text = b"".join(f for f, _ in forms)
            quoted = [real, quote(real, safe="").encode(), quote_plus(real, safe="").encode()]
            quoted.append(quote(real, safe="/").encode())
            quoted += [_PERCENT.sub(lambda m: m.group().lower(), q) for q in quoted]
            quoted.append(real.replace(b"/", b"\\/"))
            quoted.append(html.escape(real.decode("utf-8", "replace")).encode())
            self._add(alternatives, "text", real, fake, text)
            self.needles |= _needles(_longest_run(real, _UNRESERVED), quoted)
            longest = max(longest, sum(n for _, n in forms))
            for core in _b64_cores(real):
                safe = core.translate(bytes.maketrans(b"+/", b"-_"))
                pattern = re.escape(core).replace(b"\\+", b"[+\\-]").replace(b"/", b"[/_]")
                self._add(alternatives, "base64", real, fake, pattern)
                plain = frozenset(_UNRESERVED - set(b"-_"))
                self.needles |= _needles(_longest_run(core, plain), [core, safe])
                longest = max(longest, len(core))
            for form in (real.hex(), real.hex().upper(), real.hex(" "), real.hex(" ").upper()):
                self._add(alternatives, "hex", real, fake, re.escape(form.encode()))
                self.needles |= _needles(form.encode(), [form.encode()])
                longest = max(longest, len(form))
        self.pattern = re.compile(b"|".join(alternatives)) if alternatives else None
        cheapest = min(_WORD_PASS, key=lambda s: _WORD_PASS[s] + len(self._searched(s)))
        self._stride = stride or cheapest
        self._short = self._searched(self._stride)
        self._long = [n for n in self.needles if len(n) >= self._stride + 7]
        self._words = {
            int.from_bytes(n[i : i + 8], sys.byteorder)
            for n in self._long
            for i in range(len(n) - 7)
        }
        #: what a streamed chunk's end may hold back: a match is at most this long, less one
        self.hold = longest - 1
        self._inner_run = re.compile(b"[" + re.escape(bytes(sorted(inner))) + b"]*")

    def _searched(self, stride: int) -> dict[bytes, list[bytes]]:
        """The needles too short for ``stride``, by their first 4 bytes: one search each
        group (AWS key ids share ``AKIA``), or the needle's own when alone."""
        groups: dict[bytes, list[bytes]] = {}
        for needle in sorted(n for n in self.needles if len(n) < stride + 7):
            groups.setdefault(needle[:4], []).append(needle)
        return groups

    def _add(self, alternatives: list, kind: str, real: bytes, fake: bytes, regex: bytes) -> None:
        alternatives.append(b"(" + regex + b")")
        self.kinds.append((kind, real, fake))

    def windows(self, data: bytes) -> list[tuple[int, int]]:
        """Spans of ``data`` (merged, in order) that every match lies in: around each
        needle found, or each sampled word of a long needle; none when no value can be
        there, the usual case, found with one pass over the sampled words (a set lookup
        each) and one search per short needle."""
        points = []
        if len(data) < _SMALL:
            for needle in self.needles:
                points += _occurrences(data, needle)
            return _merged(points, self.hold + 1 + _NEEDLE_MAX)
        for prefix, needles in self._short.items():
            if len(needles) == 1:
                points += _occurrences(data, needles[0])
                continue
            for at in _occurrences(data, prefix):
                if any(data.startswith(n, at) for n in needles):
                    points.append(at)
        if self._long:
            words = memoryview(data)[: len(data) // 8 * 8].cast("Q")[:: self._stride // 8]
            for word in self._words.intersection(words):
                points += _occurrences(data, word.to_bytes(8, sys.byteorder))
            edge = self._stride + 16  # a needle starting this near the end may hold no word
            for needle in self._long:
                points += [len(data) - edge + at for at in _occurrences(data[-edge:], needle)]
        return _merged(points, self.hold + 1 + _NEEDLE_MAX)

    def scrub(self, data: bytes, same_length: bool = False) -> bytes:
        """``data`` without any real value (the very object when it held none)."""
        if self.exact and len(data) <= self._exact_max and data.strip() in self.exact:
            return data.replace(data.strip(), self.exact[data.strip()])
        return self.scrub_upto(data, len(data), same_length)[0]

    def scrub_upto(self, data: bytes, limit: int, same_length: bool) -> tuple[bytes, int]:
        """(``data[:end]`` scrubbed, ``end``): every match that starts before ``limit`` is
        replaced; ``end`` is ``limit`` or the end of a match that runs past it."""
        windows = self.windows(data)
        if not windows:
            return (data if limit == len(data) else data[:limit]), limit
        out, pos = [], 0
        for start, stop in windows:
            if start >= limit:
                break
            for found in self.pattern.finditer(data, start, stop):  # type: ignore[union-attr]
                if found.start() >= limit:
                    break
                out += [data[pos : found.start()], self._replacement(found, same_length)]
                pos = found.end()
        end = max(limit, pos)
        if not out:
            return (data if end == len(data) else data[:end]), end
        out.append(data[pos:end])
        return b"".join(out), end

    def _replacement(self, found: re.Match[bytes], same_length: bool) -> bytes:
        kind, real, fake = self.kinds[found.lastindex or 0]
        text = found.group()
        if kind == "hex":
            return bytes(b if b == 0x20 else 0x30 for b in text)
        if kind == "text":
            made = fake if text == real else self._as_written(text, real, fake)
            if len(made) == len(text) or not same_length:
                return made
        return (_MARKER * (len(text) // len(_MARKER) + 1))[: len(text)]

    def _as_written(self, text: bytes, real: bytes, fake: bytes) -> bytes:
        """The placeholder written as ``text`` writes ``real``: a placeholder keeps every
        non-alphanumeric character where it was, so each differing byte is a literal."""
        if len(fake) != len(real):
            return fake  # a short value's placeholder: letters and digits only
        if real not in self._tokens:
            self._tokens[real] = re.compile(b"".join(b"(" + _byte_forms(b)[0] + b")" for b in real))
        tokens = self._tokens[real].fullmatch(text).groups()  # type: ignore[union-attr]
        return b"".join(
            tok if r == f else bytes([f]) for tok, r, f in zip(tokens, real, fake, strict=True)
        )

    def keep(self, data: bytes) -> int:
        """How many bytes at the end of a streamed ``data`` to hold back: those that may
        begin a match the next chunk completes (none after a byte no match can hold)."""
        tail = data[-self.hold :][::-1] if self.hold else b""
        return self._inner_run.match(tail).end()  # type: ignore[union-attr]


def _occurrences(data: bytes, needle: bytes) -> list[int]:
    found, at = [], data.find(needle)
    while at >= 0:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def _merged(points: list[int], reach: int) -> list[tuple[int, int]]:
    """The spans ``reach`` bytes either side of ``points``, overlapping ones merged."""
    merged: list[tuple[int, int]] = []
    for at in sorted(points):
        if merged and at - reach <= merged[-1][1]:
            merged[-1] = (merged[-1][0], at + reach)
        else:
            merged.append((max(0, at - reach), at + reach))
    return merged


def _scrubber(swaps: dict[str, tuple[str, list[str]]]) -> _Scrubber | None:
    """The scrubber of a table's real values (``swaps``: placeholder -> (real, hosts));
    None when it has none."""
    pairs = {real.encode(): fake.encode() for fake, (real, _hosts) in swaps.items() if real}
    return _Scrubber(pairs) if pairs else None


def _scrub_headers(scrubber: _Scrubber, headers: http.Headers | None) -> None:
    if not headers:
        return
    fields = headers.fields
    exact = scrubber.exact and any(v.strip() in scrubber.exact for _, v in fields)
    if exact or scrubber.windows(b"\n".join(v for _, v in fields)):
        headers.fields = tuple((n, scrubber.scrub(v)) for n, v in fields)


def _decoded_body(response: http.Response) -> tuple[bytes, bool]:
    """(the body with its content codings undone, whether mitmproxy can encode it back
    the same way); ValueError when a coding cannot be undone. A label that is not a
    content coding (``utf-8``: a text codec) is taken as no coding, as clients do."""
    from mitmproxy.net import encoding

    data = response.raw_content or b""
    names = [n.strip().lower() for n in response.headers.get("content-encoding", "").split(",")]
    names = [n for n in names if n and n not in ("identity", "none")]
    same = len(names) <= 1
    for name in reversed(names):
        try:
            decoded = encoding.decode(data, name)
        except (LookupError, TypeError) as exc:
            raise ValueError(str(exc)) from exc
        if isinstance(decoded, bytes):
            data = decoded
        else:
            same = False
    return data, same


def _stream_decoder(header: str):
    """A function undoing the content codings ``header`` names on a streamed body, chunk
    by chunk (``(data, final) -> bytes``); None when one of them is unknown."""
    steps = []
    for name in reversed([n.strip().lower() for n in header.split(",") if n.strip()]):
        if name in ("identity", "none"):
            continue
        if name in ("gzip", "x-gzip"):
            steps.append(_ZlibStep(16 + zlib.MAX_WBITS))
        elif name == "deflate":
            steps.append(_ZlibStep(None))
        elif name == "br":
            import brotli  # mitmproxy's own dependency (its decoder)

            steps.append(_CallStep(brotli.Decompressor().process))
        elif name == "zstd":
            import zstandard  # mitmproxy's own dependency (its decoder)

            steps.append(_CallStep(zstandard.ZstdDecompressor().decompressobj().decompress))
        else:
            return None

    def run(data: bytes, final: bool) -> bytes:
        for step in steps:
            data = step(data, final)
        return data

    return run


class _CallStep:
    def __init__(self, call) -> None:
        self.call = call

    def __call__(self, data: bytes, final: bool) -> bytes:
        return self.call(data) if data else b""


class _ZlibStep:
    """gzip (``wbits`` 31, members one after another) or deflate (``None``: a zlib
    stream, or raw deflate as some servers send, told by its first two bytes)."""

    def __init__(self, wbits: int | None) -> None:
        self.wbits, self.pending, self.inflate = wbits, b"", None

    def __call__(self, data: bytes, final: bool) -> bytes:
        if self.inflate is None:
            self.pending += data
            if len(self.pending) < 2 and not final:
                return b""
            data, self.pending = self.pending, b""
            if self.wbits is None:
                zlib_header = (
                    len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
                )
                self.wbits = zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS
            self.inflate = zlib.decompressobj(self.wbits)
        out = [self.inflate.decompress(data)]
        while self.inflate.eof and self.inflate.unused_data and self.wbits > 16:
            rest = self.inflate.unused_data
            self.inflate = zlib.decompressobj(self.wbits)
            out.append(self.inflate.decompress(rest))
        if final:
            out.append(self.inflate.flush())
        return b"".join(out)


class _StreamScrub:
    """``flow.response.stream`` that scrubs a streamed body chunk by chunk, holding back
    the end of a chunk that may begin a value the next one completes. mitmproxy calls it
    with each chunk and once with ``b""`` at the end (then everything held goes out)."""

    def __init__(self, scrubber: _Scrubber, same_length: bool, decode=None, inner=None) -> None:
        self.scrubber, self.same_length = scrubber, same_length
        self.decode, self.inner = decode, inner
        self.carry = b""

    def __call__(self, chunk: bytes) -> list[bytes]:
        # Never b"" before the end: mitmproxy would send it as the last chunk of a
        # chunked body (``0\r\n\r\n``); an empty list sends nothing.
        final = not chunk
        if self.inner is not None:  # another addon's stream function runs first
            made = self.inner(chunk)
            parts = [made] if isinstance(made, bytes) else list(made)
            chunk = b"".join(parts)
            if not chunk and not final:
                return []
        if self.decode is not None:
            try:
                chunk = self.decode(chunk, final)
            except Exception as exc:  # a broken coding: the rest goes on as it came
                ctx.log.warn(f"credential broker: a streamed body cannot be decoded: {exc}")
                self.decode = None
        data = self.carry + chunk
        keep = 0 if final else self.scrubber.keep(data)
        out, end = self.scrubber.scrub_upto(data, len(data) - keep, self.same_length)
        self.carry = data[end:]
        return [out] if out else []


#: What a TCP flow keeps (``flow.metadata``): the end of the server's last message, and
#: whether a split value was found (the server's data is dropped from then on).
_TCP_TAIL, _TCP_MUTED = "iac_scrub_tail", "iac_scrub_muted"


class ResponseScrub:
    """What servers send back, scrubbed of every real value of the broker addon's current
    table (read again when the agent rewrites it). It runs after the broker, so a refusal
    or a withheld answer is scrubbed too."""

    def __init__(self) -> None:
        self._made: tuple[object, _Scrubber | None] | None = None

    def _current(self) -> _Scrubber | None:
        broker = ctx.master.addons.get("broker")
        if broker is None:
            return None
        broker.reload()
        if self._made is None or self._made[0] is not broker.table:
            self._made = (broker.table, _scrubber(broker.table.swaps))
        return self._made[1]

    def _head(self, flow: http.HTTPFlow) -> _Scrubber | None:
        """The current scrubber, with the answer's headers, trailers and reason phrase
        scrubbed (None: nothing to scrub)."""
        scrubber = self._current()
        response = flow.response
        if scrubber is None or response is None:
            return None
        _scrub_headers(scrubber, response.headers)
        _scrub_headers(scrubber, response.trailers)
        response.data.reason = scrubber.scrub(response.data.reason)
        return scrubber

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Headers now (a streamed answer sends them next); a streamed body chunk by chunk."""
        scrubber = self._head(flow)
        response = flow.response
        if scrubber is None or response is None:
            return
        # mitmproxy starts streaming a body of unknown length once it outgrows
        # stream_large_bodies, with no hook in between: such a body is streamed from here.
        unknown = "content-length" not in response.headers
        if not response.stream and not (ctx.options.stream_large_bodies and unknown):
            return
        inner = response.stream if callable(response.stream) else None
        decode = None
        coding = response.headers.get("content-encoding", "").strip().lower()
        if coding not in ("", "identity", "none"):
            decode = _stream_decoder(coding)
            if decode is None:
                ctx.log.warn(f"credential broker: cannot scrub a {coding!r} streamed body")
                flow.kill()
                return
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
            chunked = "chunked" in response.headers.get("transfer-encoding", "").lower()
            if response.http_version == "HTTP/1.1" and not chunked:
                response.headers["transfer-encoding"] = "chunked"
        same_length = "content-length" in response.headers
        response.stream = _StreamScrub(scrubber, same_length, decode, inner)

    def response(self, flow: http.HTTPFlow) -> None:
        """Headers, trailers and (unless streamed) the whole body, decoded and encoded back."""
        scrubber = self._head(flow)
        response = flow.response
        if scrubber is None or response is None or response.stream or not response.raw_content:
            return
        try:
            body, same = _decoded_body(response)
        except ValueError as exc:
            reason = f"an answer whose content coding cannot be undone is withheld: {exc}"
            ctx.log.warn(f"credential broker: {reason}")
            flow.response = http.Response.make(
                502, f"iac-kernel credential broker: {reason}\n", {"Content-Type": "text/plain"}
            )
            return
        scrubbed = scrubber.scrub(body)
        if scrubbed is body:
            return
        if not same:
            del response.headers["content-encoding"]
        response.content = scrubbed

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A WebSocket message from the server (whole: mitmproxy joins its frames)."""
        scrubber = self._current()
        if scrubber is None or flow.websocket is None:
            return
        message = flow.websocket.messages[-1]
        if not message.from_client:
            message.content = scrubber.scrub(message.content)

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        """Plain TCP from the server, scrubbed message by message. Nothing can be held
        back (a reply that waits for more would never come), so a value split across two
        messages is seen only when the second arrives: from then on the server's data is
        dropped (the first part already went out)."""
        scrubber = self._current()
        message = flow.messages[-1]
        if scrubber is None or message.from_client:
            return
        if flow.metadata.get(_TCP_MUTED):
            message.content = b""
            return
        tail = flow.metadata.get(_TCP_TAIL, b"")
        message.content = scrubber.scrub(message.content)
        joined = tail + message.content
        if scrubber.pattern is not None and scrubber.windows(joined):
            for found in scrubber.pattern.finditer(joined):
                if found.start() < len(tail) < found.end():
                    ctx.log.warn("credential broker: a value split across TCP messages")
                    flow.metadata[_TCP_MUTED] = True
                    message.content = b""
                    return
        flow.metadata[_TCP_TAIL] = joined[-scrubber.hold :] if scrubber.hold else b""


addons = [ResponseScrub()]
