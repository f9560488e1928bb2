"""Framework integrations: `huggingface.ChronicleCallback` for transformers' Trainer and
`lightning.ChronicleLogger` for Lightning. Each imports its framework only when imported
itself, so `chronicle_client` stays standard-library only."""
