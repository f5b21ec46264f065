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
    for ax in axes:
        ax.set_xlabel("training images seen (one point per epoch)")
    axes[0].set_ylabel("training loss (cross-entropy)")
    axes[1].set_ylabel("accuracy (fraction correct)")
    for ax in axes:  # below the axes, where no curve runs; a second run's call redraws it with both
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
