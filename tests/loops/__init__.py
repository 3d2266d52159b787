"""Tests of the loop level: lowering and its interpreter runs."""
