"""`python -m bench.generate_llama_scale`: the bench's Llama-3-scale data set
(bench/llama_scale_load.py), loaded into the database the settings name (DATABASE_URL).

A bench command, not a manage.py one: the product apps never import the bench, so the loader's
entry point lives beside it and sets Django up itself."""

from __future__ import annotations

import argparse
import os
import sys

from bench import llama_scale as ls


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.generate_llama_scale",
        description="Generate a seeded Llama-3-scale run (16,384 GPUs, 54 days, 466 "
        "interruptions).",
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="Fraction of the full size (e.g. 0.01)."
    )
    parser.add_argument("--seed", type=int, default=405)
    parser.add_argument("--project", default=ls.PROJECT_SLUG)
    parser.add_argument("--run", default=ls.RUN_NAME)
    parser.add_argument(
        "--replace", action="store_true", help="Delete a run of the same name first."
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Load the data set (Django already set up); prints the summary, then the run's id.
    Raises llama_scale_load.LoadError when it cannot load as asked (a run of that name
    exists without --replace)."""
    from bench.llama_scale_load import llama_scale_load

    args = parse(argv)
    run, summary = llama_scale_load(
        scale=args.scale, seed=args.seed, project=args.project, run=args.run, replace=args.replace
    )
    print(summary)
    print(run.pk)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from bench.llama_scale_load import LoadError

    try:
        main()
    except LoadError as exc:
        sys.exit(str(exc))
