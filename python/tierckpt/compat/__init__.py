"""Drop-in names of other checkpointing APIs over tierckpt: ``tierckpt.compat.sagemaker``."""
