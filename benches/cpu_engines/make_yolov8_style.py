"""Builds a small YOLOv8-style detector ONNX (random weights) the way an Ultralytics `dynamic=True`
export looks: input [batch, 3, height, width], SiLU convs with stride 2, C2f-like Split/Concat, SPPF
MaxPools, nearest Resize + Concat (PAN), a Detect head with DFL (Reshape/Transpose/Softmax/Conv) and
anchors computed at run time from the feature maps' shapes (Shape/Gather/Range/Expand), output
[batch, 4 + classes, anchors]. value_info carries sympy-style symbolic dims such as
`floor(height/2 - 1/2) + 1`, as the exporter writes them."""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits, infos = [], [], []
counter = [0]


def name(prefix):
    counter[0] += 1
    return f"/{prefix}_{counter[0]}"


def const(values, dtype=np.int64):
    n = name("const")
    inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), n))
    return n


def node(op, inputs, n_out=1, **attrs):
    base = name(op)
    outs = [f"{base}_out{i}" for i in range(n_out)]
    nodes.append(helper.make_node(op, inputs, outs, name=base, **attrs))
    return outs if n_out > 1 else outs[0]


def dim_expr(d, k):
    # symbolic spatial size after k stride-2 convs, as a sympy printer would write it
    e = d
    for _ in range(k):
        e = f"floor({e}/2 - 1/2) + 1" if e == d else f"floor(({e})/2 - 1/2) + 1"
    return e


def info(value, channels, level):
    dims = ["batch", channels, dim_expr("height", level), dim_expr("width", level)]
    infos.append(helper.make_tensor_value_info(value, TensorProto.FLOAT, dims))


def conv_attrs(k, s=1):
    # what torch.onnx writes on every Conv
    return dict(dilations=[1, 1], group=1, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[s, s])


def conv(x, cin, cout, k=3, s=1, level=None):
    w = const(rng.normal(0, 0.1, (cout, cin, k, k)), np.float32)
    b = const(rng.normal(0, 0.01, (cout,)), np.float32)
    y = node("Conv", [x, w, b], **conv_attrs(k, s))
    out = node("Mul", [y, node("Sigmoid", [y])])
    if level is not None:
        info(y, cout, level)
        info(out, cout, level)
    return out


def c2f(x, c, level):
    y = conv(x, c, c, 1, level=level)
    a, b = node("Split", [y, const([c // 2, c // 2])], n_out=2, axis=1)
    m = conv(conv(b, c // 2, c // 2, level=level), c // 2, c // 2, level=level)
    cat = node("Concat", [a, b, m], axis=1)
    return conv(cat, c + c // 2, c, 1, level=level)


C = 16
NC = 80
REG = 16
x0 = "images"
x = conv(x0, 3, C, 3, 2, level=1)           # P1/2
x = conv(x, C, C, 3, 2, level=2)            # P2/4
x = c2f(x, C, 2)
p3 = c2f(conv(x, C, C, 3, 2, level=3), C, 3)   # P3/8
p4 = c2f(conv(p3, C, C, 3, 2, level=4), C, 4)  # P4/16
p5 = conv(p4, C, C, 3, 2, level=5)             # P5/32
# SPPF
s = conv(p5, C, C, 1, level=5)
m1 = node("MaxPool", [s], kernel_shape=[5, 5], pads=[2] * 4, strides=[1, 1])
m2 = node("MaxPool", [m1], kernel_shape=[5, 5], pads=[2] * 4, strides=[1, 1])
m3 = node("MaxPool", [m2], kernel_shape=[5, 5], pads=[2] * 4, strides=[1, 1])
p5 = conv(node("Concat", [s, m1, m2, m3], axis=1), 4 * C, C, 1, level=5)
# PAN: upsample + concat
up = node("Resize", [p5, "", const([1, 1, 2, 2], np.float32)], mode="nearest")
p4 = c2f(conv(node("Concat", [up, p4], axis=1), 2 * C, C, 1), C, 4)
up = node("Resize", [p4, "", const([1, 1, 2, 2], np.float32)], mode="nearest")
p3 = c2f(conv(node("Concat", [up, p3], axis=1), 2 * C, C, 1), C, 3)

# Detect head
feats = []
for p in (p3, p4, p5):
    box = node("Conv", [conv(p, C, C), const(rng.normal(0, 0.1, (4 * REG, C, 1, 1)), np.float32)], **conv_attrs(1))
    cls = node("Conv", [conv(p, C, C), const(rng.normal(0, 0.1, (NC, C, 1, 1)), np.float32)], **conv_attrs(1))
    feats.append(node("Concat", [box, cls], axis=1))

flat = []
anchor_points, stride_tensors = [], []
batch = node("Gather", [node("Shape", [x0]), const(0)], axis=0)
for f, stride in zip(feats, (8, 16, 32)):
    shape = node("Shape", [f])
    h = node("Gather", [shape, const(2)], axis=0)
    w = node("Gather", [shape, const(3)], axis=0)
    target = node("Concat", [node("Unsqueeze", [batch, const([0])]), const([4 * REG + NC]), const([-1])], axis=0)
    flat.append(node("Reshape", [f, target]))
    # make_anchors: sx = arange(w) + 0.5, sy = arange(h) + 0.5, meshgrid ij, stack, view(-1, 2)
    sx = node("Add", [node("Cast", [node("Range", [const(0), w, const(1)])], to=TensorProto.FLOAT), const(0.5, np.float32)])
    sy = node("Add", [node("Cast", [node("Range", [const(0), h, const(1)])], to=TensorProto.FLOAT), const(0.5, np.float32)])
    hw = node("Concat", [node("Unsqueeze", [h, const([0])]), node("Unsqueeze", [w, const([0])])], axis=0)
    gx = node("Expand", [node("Unsqueeze", [sx, const([0])]), hw])
    gy = node("Expand", [node("Unsqueeze", [sy, const([1])]), hw])
    grid = node("Concat", [node("Unsqueeze", [gx, const([2])]), node("Unsqueeze", [gy, const([2])])], axis=2)
    pts = node("Reshape", [grid, const([-1, 2])])
    anchor_points.append(pts)
    n = node("Gather", [node("Shape", [pts]), const([0])], axis=0)
    stride_tensors.append(node("Expand", [const([[float(stride)]], np.float32), node("Concat", [n, const([1])], axis=0)]))

cat = node("Concat", flat, axis=2)
box, cls = node("Split", [cat, const([4 * REG, NC])], n_out=2, axis=1)
anchors = node("Transpose", [node("Concat", anchor_points, axis=0)], perm=[1, 0])
strides = node("Transpose", [node("Concat", stride_tensors, axis=0)], perm=[1, 0])
# DFL
a = node("Gather", [node("Shape", [box]), const(2)], axis=0)
b4 = node("Concat", [node("Unsqueeze", [batch, const([0])]), const([4, REG]), node("Unsqueeze", [a, const([0])])], axis=0)
d = node("Softmax", [node("Transpose", [node("Reshape", [box, b4])], perm=[0, 2, 1, 3])], axis=1)
d = node("Conv", [d, const(np.arange(REG, dtype=np.float32).reshape(1, REG, 1, 1), np.float32)], **conv_attrs(1))
b3 = node("Concat", [node("Unsqueeze", [batch, const([0])]), const([4]), node("Unsqueeze", [a, const([0])])], axis=0)
d = node("Reshape", [d, b3])
lt, rb = node("Split", [d, const([2, 2])], n_out=2, axis=1)
anc = node("Unsqueeze", [anchors, const([0])])
x1y1 = node("Sub", [anc, lt])
x2y2 = node("Add", [anc, rb])
c_xy = node("Div", [node("Add", [x1y1, x2y2]), const(2.0, np.float32)])
wh = node("Sub", [x2y2, x1y1])
dbox = node("Mul", [node("Concat", [c_xy, wh], axis=1), strides])
nodes.append(helper.make_node("Concat", [dbox, node("Sigmoid", [cls])], ["output0"], axis=1, name="/out"))

graph = helper.make_graph(
    nodes, "yolov8-style",
    [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
    [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 4 + NC, "anchors"])],
    inits, value_info=infos)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
