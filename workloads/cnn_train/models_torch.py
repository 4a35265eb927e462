"""PyTorch models written out (torchvision is not assumed); every model returns logits."""

import torch
from torch import nn


class Concat(nn.Module):
    """Runs parallel branches on the same input and concatenates them along channels."""

    def __init__(self, *branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        return torch.cat([branch(x) for branch in self.branches], dim=1)


def tiny(image_size, num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    )


def alexnet(image_size, num_classes):
    """The single-tower AlexNet of tf_cnn_benchmarks and torchvision (no LRN)."""
    features = nn.Sequential(
        nn.Conv2d(3, 64, 11, stride=4),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2),
        nn.Flatten(),
    )
    with torch.no_grad():
        feature_count = features(torch.zeros(1, 3, image_size, image_size)).shape[1]
    return nn.Sequential(
        features,
        nn.Dropout(0.5),
        nn.Linear(feature_count, 4096),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(4096, 4096),
        nn.ReLU(inplace=True),
        nn.Linear(4096, num_classes),
    )


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""

    expansion = 4

    def __init__(self, in_channels, width, stride):
        super().__init__()
        out_channels = width * self.expansion
        self.residual = nn.Sequential(
            nn.Conv2d(in_channels, width, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.residual(x) + self.shortcut(x))


def resnet50_on_stem(stem, num_outputs):
    """ResNet-50's bottleneck stages (3-4-6-3) and classifier after ``stem``, which must output 64 channels."""
    layers = list(stem)
    in_channels = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(Bottleneck(in_channels, width, stride))
            in_channels = width * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_channels, num_outputs)]
    return nn.Sequential(*layers)


def resnet50(image_size, num_classes):
    """ImageNet ResNet-50: 7x7 stride-2 stem and max pool."""
    stem = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    return resnet50_on_stem(stem, num_classes)


def _conv(in_channels, out_channels, kernel, stride=1, padding=0):
    """Inception's basic unit: bias-free convolution, batch norm, ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=padding, bias=False),
        nn.BatchNorm2d(out_channels, eps=0.001),
        nn.ReLU(inplace=True),
    )


def _pool_branch(in_channels, out_channels):
    return nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), _conv(in_channels, out_channels, 1))


def _inception_a(in_channels, pool_channels):  # 35x35, Mixed_5b..5d
    return Concat(
        _conv(in_channels, 64, 1),
        nn.Sequential(_conv(in_channels, 48, 1), _conv(48, 64, 5, padding=2)),
        nn.Sequential(_conv(in_channels, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, padding=1)),
        _pool_branch(in_channels, pool_channels),
    )


def _inception_b(in_channels):  # 35x35 -> 17x17, Mixed_6a
    return Concat(
        _conv(in_channels, 384, 3, stride=2),
        nn.Sequential(_conv(in_channels, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, stride=2)),
        nn.MaxPool2d(3, stride=2),
    )


def _inception_c(in_channels, c7):  # 17x17 with factorized 7x7, Mixed_6b..6e
    return Concat(
        _conv(in_channels, 192, 1),
        nn.Sequential(
            _conv(in_channels, c7, 1),
            _conv(c7, c7, (1, 7), padding=(0, 3)),
            _conv(c7, 192, (7, 1), padding=(3, 0)),
        ),
        nn.Sequential(
            _conv(in_channels, c7, 1),
            _conv(c7, c7, (7, 1), padding=(3, 0)),
            _conv(c7, c7, (1, 7), padding=(0, 3)),
            _conv(c7, c7, (7, 1), padding=(3, 0)),
            _conv(c7, 192, (1, 7), padding=(0, 3)),
        ),
        _pool_branch(in_channels, 192),
    )


def _inception_d(in_channels):  # 17x17 -> 8x8, Mixed_7a
    return Concat(
        nn.Sequential(_conv(in_channels, 192, 1), _conv(192, 320, 3, stride=2)),
        nn.Sequential(
            _conv(in_channels, 192, 1),
            _conv(192, 192, (1, 7), padding=(0, 3)),
            _conv(192, 192, (7, 1), padding=(3, 0)),
            _conv(192, 192, 3, stride=2),
        ),
        nn.MaxPool2d(3, stride=2),
    )


def _split_1x3_3x1(channels):
    return Concat(_conv(channels, channels, (1, 3), padding=(0, 1)), _conv(channels, channels, (3, 1), padding=(1, 0)))


def _inception_e(in_channels):  # 8x8 with expanded filter banks, Mixed_7b..7c
    return Concat(
        _conv(in_channels, 320, 1),
        nn.Sequential(_conv(in_channels, 384, 1), _split_1x3_3x1(384)),
        nn.Sequential(_conv(in_channels, 448, 1), _conv(448, 384, 3, padding=1), _split_1x3_3x1(384)),
        _pool_branch(in_channels, 192),
    )


def inception3(image_size, num_classes):
    """Inception v3 (Szegedy et al. 2016) as in torchvision, without the auxiliary head."""
    return nn.Sequential(
        _conv(3, 32, 3, stride=2),
        _conv(32, 32, 3),
        _conv(32, 64, 3, padding=1),
        nn.MaxPool2d(3, stride=2),
        _conv(64, 80, 1),
        _conv(80, 192, 3),
        nn.MaxPool2d(3, stride=2),
        _inception_a(192, 32),
        _inception_a(256, 64),
        _inception_a(288, 64),
        _inception_b(288),
        _inception_c(768, 128),
        _inception_c(768, 160),
        _inception_c(768, 160),
        _inception_c(768, 192),
        _inception_d(768),
        _inception_e(1280),
        _inception_e(2048),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Linear(2048, num_classes),
    )


BUILDERS = {"tiny": tiny, "alexnet": alexnet, "resnet50": resnet50, "inception3": inception3}


def build_model(name, image_size, num_classes):
    return BUILDERS[name](image_size, num_classes)


def parameter_count(model):
    return sum(parameter.numel() for parameter in model.parameters())
