"""The config-driven pipeline: config models, clusters, the runner, the persistent
budget ledger, deployment settings and the tasks."""
