"""The suite. Imported before anything it tests: the modules it reads are compiled once per
checkout, even where ``PYTHONDONTWRITEBYTECODE`` is set. Every xdist worker collects every
test module (its asserts rewritten) and the suite starts hundreds of CLI and service
processes, which read what was compiled here; compiling them again on every import cost the
quick tier about 10 s. Python ignores a write that fails (a read-only checkout)."""

import sys

sys.dont_write_bytecode = False
