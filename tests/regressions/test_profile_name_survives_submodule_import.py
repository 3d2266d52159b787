"""Found in this session's full suite (order-dependent): ``wiadsl.profile`` is both a
public function and a subpackage. The first import of any ``wiadsl.profile.*`` module
(the function's own lazy import included) rebound ``wiadsl.profile`` to the package, so
``wiadsl.profile(kernel, ...)`` was "module is not callable" from then on."""

import subprocess
import sys

CODE = """
import inspect, wiadsl
before = wiadsl.profile
import wiadsl.profile.profiler, wiadsl.profile.cli
assert wiadsl.profile is before and callable(wiadsl.profile), wiadsl.profile
print(list(inspect.signature(wiadsl.profile).parameters))
"""


def test_the_profile_function_survives_importing_its_package() -> None:
    # A fresh interpreter: in this one the package may already be imported.
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['kernel', 'args', 'options']"
