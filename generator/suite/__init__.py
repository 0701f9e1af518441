"""What only the portability suite uses: its statistics, its result records and `gen-recipe report`."""
