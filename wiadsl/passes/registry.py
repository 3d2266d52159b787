"""Imports every pass module so that ``PASSES`` is complete."""

from . import (  # noqa: F401
    bn_fold,
    canonicalize,
    cse,
    dce,
    depthwise,
    fuse,
    inline,
    licm,
    mixed_precision,
    pattern_pass,
    plan_memory,
    pool_padding,
    quantize_int8,
    sccp,
    shape_specialize,
    simplify_cfg,
)
