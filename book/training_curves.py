"""A training run's curves as the pages draw them: loss and accuracies against the training images seen."""

from __future__ import annotations

import numpy as np


def plot_history(axes, loss, train_acc, test_acc, images_per_epoch: int, label: str, style: str = "-") -> None:
    """One run on two axes: its training loss on ``axes[0]``, its training and test accuracy on ``axes[1]``,
    a point per epoch at the number of training images seen by its end."""
    seen = images_per_epoch * np.arange(1, len(loss) + 1)
    axes[0].plot(seen, loss, style, marker="o", ms=3, label=f"training loss ({label})")
    axes[1].plot(seen, train_acc, style, label=f"training accuracy ({label})")
    axes[1].plot(seen, test_acc, style, marker="o", ms=3, label=f"test accuracy ({label})")
