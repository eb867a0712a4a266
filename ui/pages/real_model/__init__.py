"""The Real-model page: a pretrained model's attention per layer and head vs. the i.i.d. theory."""
