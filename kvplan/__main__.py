"""`python -m kvplan ...`: the same as the `kvplan` console script."""

from kvplan.cli import main

if __name__ == "__main__":
    main()
