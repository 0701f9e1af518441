"""python -m workloads: list the workloads, one per line (name and description)."""

from workloads.registry import WORKLOADS


def main():
    for w in WORKLOADS.values():
        print(f"{w.name}\t{w.description}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
