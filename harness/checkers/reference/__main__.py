"""`python -m harness.checkers.reference`: print the checker reference docs/writing-a-case.md holds between its
`<!-- checkers: … -->` and `<!-- end of checkers -->` markers."""

import sys

from harness.checkers.reference import checker_reference

if sys.argv[1:]:
    sys.exit("usage: python -m harness.checkers.reference  (prints docs/writing-a-case.md's checker reference)")
print(checker_reference(), end="")
