"""The Raspberry Pi image (docs/image.md): ``python -m image build`` (image/build.py)."""
