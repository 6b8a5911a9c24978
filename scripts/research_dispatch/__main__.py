"""`python -m research_dispatch` runs the same CLI as the console script."""

from research_dispatch.cli import main

if __name__ == "__main__":
    main()
