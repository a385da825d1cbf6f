from iac_kernel.cli import main

raise SystemExit(main())
