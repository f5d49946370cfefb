"""Reading inventory from what hosts report about their GPUs."""
