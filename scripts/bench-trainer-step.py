"""Times what the optimizer task's trainer adds to every step, on the task's
own model, with the trainer's own functions: the detached gradients handed
to the optimizer's tensors, the structural check, the copy back into the
parameters and the clock read after the step.

Usage: bin/genoptask DIR && /usr/bin/python3 scripts/bench-trainer-step.py DIR
"""

import importlib.util
import json
import os
import sys
import time
import timeit

import torch

REPS = 20000


def main():
    task_dir = sys.argv[1]
    spec = importlib.util.spec_from_file_location("trainer", os.path.join(task_dir, "train.py"))
    trainer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trainer)
    trainer.task_model.setup_determinism()
    with open(os.path.join(task_dir, "task.json")) as f:
        task = json.load(f)
    model = trainer.task_model.build(task, torch.Generator().manual_seed(1))
    params = list(model.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    tensors = [p.detach().clone() for p in params]
    tables = trainer.hook_tables(model)

    def grads():
        for t, p in zip(tensors, params):
            t.grad = None if p.grad is None else p.grad.detach()

    def check():
        trainer.tampered(tensors, params, tables)

    def copy_back():
        with torch.no_grad():
            for p, t in zip(params, tensors):
                p.copy_(t)

    print(f"{sum(p.numel() for p in params)} parameters in {len(params)} tensors, {len(tables)} hook tables")
    for name, fn in (("gradients", grads), ("check", check), ("copy back", copy_back), ("clock", time.process_time)):
        runs = [timeit.timeit(fn, number=REPS) / REPS * 1e6 for _ in range(3)]
        print(f"{name}: " + ", ".join(f"{r:.2f}" for r in runs) + " us")


if __name__ == "__main__":
    main()
