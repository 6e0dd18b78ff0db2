"""Health score: signals -> component scores -> one 0-100 score with reasons."""
