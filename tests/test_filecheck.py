"""The FileCheck helper must fail when the output does not match (it guards every IR test)."""

import pytest

from wiadsl.testing.filecheck import FileCheckError, filecheck

OUT = """func @f(%x: f32) -> f32 {
^entry:
  %0 = arith.add %x, %x : f32
  %1 = arith.mul %0, %0 : f32
  return %1 : f32
}"""


def test_matches_in_order_with_next_same_and_regex():
    filecheck(OUT, """
    // CHECK-LABEL: func @f
    // CHECK: %0 = arith.add
    // CHECK-NEXT: arith.mul {{%[0-9]+}},
    // CHECK-SAME: : f32
    // CHECK-NOT: arith.sub
    // CHECK: return
    """)


@pytest.mark.parametrize("checks", [
    "CHECK: arith.sub",                                  # absent
    "CHECK: arith.mul\nCHECK: arith.add",                # out of order
    "CHECK: ^entry:\nCHECK-NEXT: arith.mul",             # not the next line
    "CHECK: arith.add\nCHECK-NOT: arith.mul\nCHECK: return",  # forbidden in between
    "CHECK: arith.add\nCHECK-SAME: i64",                 # not on the same line
])
def test_mismatches_fail(checks):
    with pytest.raises(FileCheckError):
        filecheck(OUT, checks)


def test_no_directives_is_an_error():
    with pytest.raises(FileCheckError, match="no CHECK"):
        filecheck(OUT, "nothing here")
