"""The papers drflmodel implements, written once.

Docstrings, messages, examples and the documentation cite a paper by its short name and the
paper's own section or equation numbers, e.g. "Scaff-PD paper (Yu et al. 2023), Algorithm 1" or
"DRFL paper (Bai et al. 2025), eq. (5)"; the full reference is here and on the documentation's
References page (generated from :data:`PAPERS`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Paper", "PAPERS"]


@dataclass(frozen=True)
class Paper:
    """One paper: ``short`` is the name used in the text, ``full()`` the reference."""

    short: str
    authors: str
    title: str
    venue: str
    year: int
    url: str

    def full(self) -> str:
        text = f'{self.authors}, "{self.title}", {self.venue}, {self.year}.'
        return f"{text} {self.url}" if self.url else text


PAPERS: dict[str, Paper] = {
    "scaffpd": Paper(
        short="Scaff-PD paper",
        authors="Yaodong Yu, Sai Praneeth Karimireddy, Yi Ma and Michael I. Jordan",
        title="Scaff-PD: Communication Efficient Fair and Robust Federated Learning",
        venue="arXiv:2307.13381", year=2023, url="https://arxiv.org/abs/2307.13381"),
    "fafl": Paper(
        short="FAFL paper",
        authors="Zhuozhuo Tu, Zhiqiang Xu, Tairan Huang, Dacheng Tao and Ping Li",
        title="Fairness-Aware Federated Learning",
        venue="OpenReview (submitted to ICLR 2022)", year=2021,
        url=""),   # the OpenReview record; no arXiv version
    "drfl": Paper(
        short="DRFL paper",
        authors="Wen Bai, Yi Wong, Xiao Qiao and Chin Pang Ho",
        title="Distributionally Robust Federated Learning: An ADMM Algorithm",
        venue="arXiv:2503.18436", year=2025, url="https://arxiv.org/abs/2503.18436"),
    "relative": Paper(
        short="relative-fairness paper",
        authors="Shogo Nakakita, Tatsuya Kaneko, Shinya Takamaeda-Yamazaki and Masaaki Imaizumi",
        title="Federated Learning with Relative Fairness",
        venue="arXiv:2411.01161", year=2024, url="https://arxiv.org/abs/2411.01161"),
    "fairvfl": Paper(
        short="fair-VFL paper",
        authors="Changxin Liu, Zhenan Fan, Zirui Zhou, Yang Shi, Jian Pei, Lingyang Chu and Yong Zhang",
        title="Achieving Model Fairness in Vertical Federated Learning",
        venue="arXiv:2109.08344", year=2021, url="https://arxiv.org/abs/2109.08344"),
}
