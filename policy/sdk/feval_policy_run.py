"""Runs a policy.py: loads its route function and serves it (feval_policy.serve)."""

import importlib.util
import os
import sys


def load(name, path):
    # Modules are loaded by path: the import system's directory listing is
    # not relied upon.
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(path):
    sdk = load("feval_policy", os.path.join(os.path.dirname(os.path.abspath(__file__)), "feval_policy.py"))
    module = load("policy", path)
    route = getattr(module, "route", None)
    if not callable(route):
        sys.exit("policy.py defines no route(request, call) function")
    sdk.serve(route)


if __name__ == "__main__":
    main(sys.argv[1])
