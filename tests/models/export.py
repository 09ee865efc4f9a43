"""Makes the test models in this folder (see NOTICE.md): real architectures from their public
definitions, random weights, small inputs and reduced widths so that they stay a few hundred KiB.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch ultralytics transformers onnx onnxscript
    /tmp/venv/bin/python tests/models/export.py

Exports are not byte-identical from one run or version to the next: tests check recognition,
shapes and decoding, never hashes. Nothing here runs in CI; the files are committed.
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 160
torch.manual_seed(0)


def ultralytics_export(yaml_name, scale, out_name, **export_options):
    """An Ultralytics model from its yaml with a reduced width, exported as Ultralytics does."""
    import yaml
    import ultralytics
    from ultralytics import YOLO

    source = os.path.join(os.path.dirname(ultralytics.__file__), "cfg", "models", *yaml_name.split("/"))
    with open(source) as f:
        definition = yaml.safe_load(f)
    definition["scales"] = {"t": scale}
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, os.path.basename(yaml_name).replace(".yaml", "t.yaml"))
        with open(path, "w") as f:
            yaml.safe_dump(definition, f)
        model = YOLO(path)
        exported = model.export(format="onnx", imgsz=SIZE, opset=17, simplify=False, dynamic=False, **export_options)
        shutil.copy(exported, os.path.join(HERE, out_name))


def rt_detr_export(out_name):
    """Hugging Face's RT-DETR (Apache-2.0) with a tiny ResNet backbone and one decoder layer."""
    from transformers import RTDetrConfig, RTDetrForObjectDetection, RTDetrResNetConfig

    backbone = RTDetrResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"]
    )
    config = RTDetrConfig(
        backbone_config=backbone,
        encoder_in_channels=[32, 64, 128],
        encoder_hidden_dim=32,
        encoder_ffn_dim=64,
        d_model=32,
        decoder_in_channels=[32, 32, 32],
        decoder_ffn_dim=64,
        decoder_layers=1,
        encoder_layers=1,
        num_queries=100,
        num_labels=80,
        decoder_attention_heads=2,
        encoder_attention_heads=2,
        decoder_n_points=2,
        num_denoising=0,
        anchor_image_size=[SIZE, SIZE],
        use_pretrained_backbone=False,
    )
    model = RTDetrForObjectDetection(config).eval()

    class Outputs(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, pixel_values):
            out = self.inner(pixel_values=pixel_values)
            return out.logits, out.pred_boxes

    torch.onnx.export(
        Outputs(model),
        (torch.rand(1, 3, SIZE, SIZE),),
        os.path.join(HERE, out_name),
        input_names=["pixel_values"],
        output_names=["logits", "pred_boxes"],
        opset_version=17,
        dynamo=False,
    )


def colour_classifier(out_name):
    """A classifier whose answer is the crop's dominant colour: softmax(20 × the mean of each
    channel) over the labels red, green, blue. Input: float32 [1,3,32,32] in 0..1."""
    graph = helper.make_graph(
        [
            helper.make_node("GlobalAveragePool", ["input"], ["mean"]),
            helper.make_node("Flatten", ["mean"], ["flat"]),
            helper.make_node("Mul", ["flat", "sharpness"], ["sharp"]),
            helper.make_node("Softmax", ["sharp"], ["probabilities"], axis=1),
        ],
        "colour",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor("sharpness", TensorProto.FLOAT, [], [20.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="jetson-detectd")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, out_name))


if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    steps = {
        # nms=False: the NMS-free one-to-one head, [1,300,6] (Ultralytics 8.4 exports the one-to-many
        # head for external NMS by default).
        "yolo26": lambda: ultralytics_export("26/yolo26.yaml", [0.33, 0.0625, 256], "yolo26t_160_random.onnx", nms=False),
        "yolo11": lambda: ultralytics_export("11/yolo11.yaml", [0.33, 0.0625, 256], "yolo11t_160_random.onnx"),
        "rtdetr": lambda: rt_detr_export("rtdetr_tiny_160_random.onnx"),
        "colour": lambda: colour_classifier("colour_classifier.onnx"),
    }
    for name, step in steps.items():
        if not wanted or name in wanted:
            step()
            print("made", name)
