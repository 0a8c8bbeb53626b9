"""rag_eval's tests by area (test_*.py; helpers in support.py): ``python3 -m unittest``."""
