"""python -m workloads: list the workloads, one per line (name and description)."""

WORKLOADS = (
    ("cnn", "CNN image classifier of the CUG 2025 Frontier container study (single/dp/ddp)"),
    ("gan3d", "3D convolutional GAN on 25^3 calorimeter showers (PASC 2020 3DGAN; single/ddp)"),
    ("resnet", "ResNet-50/101 and InceptionV3 synthetic training throughput (torchvision)"),
    ("mnist", "MNIST example CNN classifier of the MODAK study (CPU; single/ddp)"),
    ("llm", "LLM serving: time to answer a fixed prompt set on 0..N GPUs (ollama or transformers)"),
    ("mpi", "mpi4py ping-pong/allreduce latency and bandwidth, with the transport in use"),
)


def main():
    for name, description in WORKLOADS:
        print(f"{name}\t{description}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
