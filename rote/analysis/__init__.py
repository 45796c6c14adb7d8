"""Analyses of trained runs. Each function takes a model and examples and returns numbers: it never
trains, reads files or plots, and every hook it adds is removed before it returns."""
