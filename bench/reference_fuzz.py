"""The long run of the reference-checked property tests (tests/core/test_reference.py).

The same properties as CI's (strict JSON against ``json.loads``, Python literals
against ``ast.literal_eval``, sloppy JSON against the object written and
json-repair, in every JSON-object format, finished and streamed; a string cut
anywhere is never a value, tests/core/test_cut_strings.py), with new
random examples and many more of them. A failure prints hypothesis's smallest
example: a bug in toolrelay, unless the reference is provably wrong.

Run: ``.venv/bin/python bench/reference_fuzz.py --examples 2000`` (each property
gets that many; a few minutes on two cores). ``--seconds`` bounds the run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per property")
    parser.add_argument("--seconds", type=int, default=300, help="stop the run after this long")
    args = parser.parse_args()
    env = dict(os.environ, REFERENCE_EXAMPLES=str(args.examples), REFERENCE_RANDOM="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command.append(str(ROOT / "tests" / "core" / "test_reference.py"))
    command.append(str(ROOT / "tests" / "core" / "test_cut_strings.py"))
    try:
        return subprocess.run(command, env=env, cwd=ROOT, timeout=args.seconds).returncode
    except subprocess.TimeoutExpired:
        print(f"stopped after {args.seconds} s (the properties run so far passed)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
