"""Analyses over finished runs: compare two evaluations, leaderboards, correlation with downstream results,
best-of-N and win rate, position and length bias, and the pool's plots. Each module is one analysis; the CLI
imports them when its command runs."""
