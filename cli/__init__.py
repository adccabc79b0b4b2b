"""The servecap command line: parse, call one function, render, map errors to exit codes."""
