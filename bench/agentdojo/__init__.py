"""AgentDojo (suites v1.2.2) through agentcore under a fully compromised model; see
``python -m bench.agentdojo --help`` and bench/RESULTS.md."""
