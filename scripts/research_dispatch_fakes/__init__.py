"""Offline fakes of OpenRouter, Tavily and GitHub, served over real HTTP on 127.0.0.1.

The fakes speak the real wire formats so that the real `openai`, `tavily-python` and `PyGithub`
clients are exercised end to end. They deliberately import nothing from the product but its
conversation contract (`research_dispatch.leg.contract`: the strings both sides agree on, and the word
count; no logic): a fake that shared the product's parsing could not catch its bugs.
"""
