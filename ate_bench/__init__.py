"""ATE-Bench: fix the agent and the task, vary the framework, and measure the agent's effort.

See ate_bench/README.md for the task format and how to run a task with a real agent.
"""
