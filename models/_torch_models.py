"""ResNet, MobileNetV2 and an FPN-style text-detector head written out in torch
(torchvision is not a dependency).

Layouts follow torchvision's resnet.py / mobilenetv2.py so the exported graphs look
like the ones people get from `torchvision.models.resnet50()`: Conv + BatchNorm + ReLU
stems, MaxPool, residual Adds, depthwise (grouped) convs, ReLU6 (Clip), global average
pooling and a Linear head.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    """Conv (no bias, 'same'-style padding) followed by BatchNorm."""
    return [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


class BasicBlock(nn.Module):
    """ResNet-18/34 block: two 3x3 convs and an identity (or 1x1 projected) shortcut."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            *conv_bn(cin, width, 3, stride), nn.ReLU(inplace=True), *conv_bn(width, cout, 3)
        )
        down = stride != 1 or cin != cout
        self.short = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if down else nn.Identity()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.short(x))


class Bottleneck(BasicBlock):
    """ResNet-50 block: 1x1 reduce, 3x3 (carries the stride, as in torchvision v1.5), 1x1 expand."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        nn.Module.__init__(self)
        cout = width * self.expansion
        self.body = nn.Sequential(
            *conv_bn(cin, width, 1),
            nn.ReLU(inplace=True),
            *conv_bn(width, width, 3, stride),
            nn.ReLU(inplace=True),
            *conv_bn(width, cout, 1),
        )
        down = stride != 1 or cin != cout
        self.short = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if down else nn.Identity()
        self.relu = nn.ReLU(inplace=True)


class ResNet(nn.Module):
    """(B, 3, H, W) float32 -> (B, num_classes) logits."""

    def __init__(
        self,
        block: type[BasicBlock],
        layers: tuple[int, ...],
        width: int = 64,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            *conv_bn(3, width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        )
        blocks: list[nn.Module] = []
        cin = width
        for i, n in enumerate(layers):
            w = width * 2**i
            for j in range(n):
                blocks.append(block(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(pixel_values))  # (B, C, H/32, W/32)
        return self.fc(torch.flatten(self.pool(x), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear project."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [*conv_bn(cin, hidden, 1), nn.ReLU6(inplace=True)]
        layers += [*conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(inplace=True)]
        layers += conv_bn(hidden, cout, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


# (expand t, channels c, repeats n, first stride s): Table 2 of Sandler et al. 2018.
MOBILENETV2_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class MobileNetV2(nn.Module):
    """(B, 3, H, W) float32 -> (B, num_classes) logits."""

    def __init__(
        self,
        settings: tuple[tuple[int, int, int, int], ...] = MOBILENETV2_SETTINGS,
        stem: int = 32,
        last: int = 1280,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, stem, 3, 2), nn.ReLU6(inplace=True)]
        cin = stem
        for t, c, n, s in settings:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [*conv_bn(cin, last, 1), nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.features(pixel_values).mean((2, 3))  # (B, C): global average pool
        return self.classifier(x)


def randomize_batchnorm(model: nn.Module, gen: torch.Generator) -> None:
    """Give every BatchNorm non-trivial running stats and affine params.

    Fresh BatchNorm layers have mean 0, var 1, gamma 1, beta 0, which makes them an
    identity in eval mode and would hide a wrong BatchNormalization kernel.
    """
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.normal_(0.0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
                m.weight.uniform_(0.5, 1.0, generator=gen)
                m.bias.normal_(0.0, 0.1, generator=gen)


def resnet(size: str) -> ResNet:
    """tiny: bottleneck ResNet with one block per stage, width 8; full: ResNet-50."""
    if size == "tiny":
        return ResNet(Bottleneck, (1, 1, 1, 1), width=8, num_classes=10)
    return ResNet(Bottleneck, (3, 4, 6, 3), width=64, num_classes=1000)


def mobilenetv2(size: str) -> MobileNetV2:
    """tiny: 4 inverted-residual stages of 8-16 channels; full: MobileNetV2 1.0."""
    if size == "tiny":
        tiny = ((1, 8, 1, 1), (6, 8, 2, 2), (6, 16, 2, 2), (6, 16, 1, 1))
        return MobileNetV2(tiny, stem=8, last=32, num_classes=10)
    return MobileNetV2()


class UpsampleHead(nn.Module):
    """A segmentation / text-detector head (DBNet-like): a stride-4 stem, then nearest
    x2 upsampling feeding 3x3 convs, a sigmoid probability map (B, 1, H, W).

    At "full" (368x544 input) the first conv after the upsampling is the 96 -> 24
    3x3 conv at 184x272 of issue 26 (a Conv whose producer is a Resize)."""

    def __init__(self, width: int, mid: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width // 2, 3, 2, 1), nn.ReLU(), nn.Conv2d(width // 2, width, 3, 2, 1)
        )
        self.up1 = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.conv1 = nn.Conv2d(width, mid, 3, 1, 1)
        self.up2 = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.conv2 = nn.Conv2d(mid, 1, 3, 1, 1)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.stem(pixel_values)  # (B, width, H/4, W/4)
        x = torch.relu(self.conv1(self.up1(x)))  # (B, mid, H/2, W/2)
        return torch.sigmoid(self.conv2(self.up2(x)))  # (B, 1, H, W)


def upsample_head(size: str) -> UpsampleHead:
    """tiny: 16 -> 8 channels; full: 96 -> 24 (the issue's conv)."""
    return UpsampleHead(16, 8) if size == "tiny" else UpsampleHead(96, 24)
