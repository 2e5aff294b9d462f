"""Fine-tuning and evaluation of GROWN+UP content extractors on the labelled datasets."""
