"""``python -m image build``: the Raspberry Pi image (image/build.py, docs/image.md)."""

from image.build import main

raise SystemExit(main())
