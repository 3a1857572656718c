"""deps.py: imports what a tools/ script needs, or exits (status 3) with the one command that
installs it (tools/README.md, "Setup"; the versions are in tools/requirements.txt)."""
import sys

INSTALL = ("install it with `sudo apt-get install -y python3-torch python3-numpy` (Debian 12, PyTorch 1.13; "
           "run the tools with /usr/bin/python3 if your python3 is another one) or "
           "`python3 -m venv .venv && .venv/bin/python -m pip install -r tools/requirements.txt` (PyTorch 2.x)")


def need(script, module, min_torch=None):
    """Returns the imported module; on failure prints why and how to install it, and exits 3."""
    try:
        mod = __import__(module)
    except ImportError as e:
        print(f"{script}: needs {module} ({e}): {INSTALL}", file=sys.stderr)
        sys.exit(3)
    if module == "torch" and min_torch:
        have = tuple(int(x) for x in mod.__version__.split("+")[0].split(".")[:2] if x.isdigit())
        want = tuple(int(x) for x in min_torch.split("."))
        if have < want:
            print(f"{script}: needs PyTorch >= {min_torch}, this is {mod.__version__}: "
                  "`python3 -m venv .venv && .venv/bin/python -m pip install -r tools/requirements.txt`",
                  file=sys.stderr)
            sys.exit(3)
    return mod
