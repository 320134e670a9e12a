"""A fuzz harness of pydial's entry points: every case classified as a correct result, a typed error or a problem."""
