use proptest::prelude::*;

use super::*;
use crate::onnx::test_models::*;

fn repo_file(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).expect(path)
}

#[test]
fn inputs_outputs_and_their_producers_are_read() {
    let model = model(&[
        graph_node(node("Conv", &["images", "w"], &["features"])),
        graph_node(node("Sigmoid", &["features"], &["scores"])),
        graph_node(node("Identity", &["features"], &["boxes"])),
        initializer("w", &[1.0, 2.0]),
        graph_input("images", FLOAT, &[None, Some(3), Some(640), Some(640)]),
        graph_input("w", FLOAT, &[Some(2)]),
        graph_output("scores", FLOAT16, &[Some(1), Some(300), Some(80)]),
        graph_output("boxes", FLOAT, &[Some(1), Some(300), Some(4)]),
    ]);
    let interface = read(&model).expect("interface");
    assert_eq!(interface.producer, "test");
    assert_eq!(interface.inputs.len(), 1, "a weight listed among the inputs is not an input");
    assert_eq!(interface.inputs[0].to_string(), "`images` float32 [?, 3, 640, 640]");
    assert_eq!(interface.describe_outputs(), "`scores` float16 [1, 300, 80], `boxes` float32 [1, 300, 4]");
    assert_eq!(interface.outputs[0].producer.as_deref(), Some("Sigmoid"));
    assert_eq!(interface.outputs[1].fixed_dims(), Some(vec![1, 300, 4]));
    assert_eq!(interface.inputs[0].fixed_dims(), None);
    assert_eq!(interface.input_scaling, InputScaling::IDENTITY);
    assert_eq!(interface.weight_bytes, float_tensor("w", &[1.0, 2.0]).len() as u64, "the initializer's message");
}

#[test]
fn the_scaling_a_graph_applies_to_its_input_is_followed_through_elementwise_operators() {
    let model = model(&[
        graph_node(constant_float("c255", 255.0)),
        graph_node(node("Shape", &["pixels"], &["shape"])),
        graph_node(node("Cast", &["pixels"], &["float"])),
        graph_node(node("Div", &["float", "c255"], &["unit"])),
        graph_node(node("Sub", &["unit", "mean"], &["centred"])),
        graph_node(node("Mul", &["inv_std", "centred"], &["normalised"])),
        graph_node(node("Conv", &["normalised", "w"], &["features"])),
        graph_node(node("Add", &["features", "mean"], &["later"])),
        initializer("mean", &[0.485, 0.456, 0.406]),
        initializer("inv_std", &[4.0, 5.0, 2.0]),
        graph_input("pixels", UINT8, &[Some(1), Some(224), Some(224), Some(3)]),
        graph_output("later", FLOAT, &[Some(1), Some(10)]),
    ]);
    let scaling = read(&model).expect("interface").input_scaling;
    let expected_scale = [4.0 / 255.0, 5.0 / 255.0, 2.0 / 255.0];
    let expected_offset = [-0.485 * 4.0, -0.456 * 5.0, -0.406 * 2.0];
    for channel in 0..3 {
        assert!((scaling.scale[channel] - expected_scale[channel]).abs() < 1e-7, "{scaling:?}");
        assert!((scaling.offset[channel] - expected_offset[channel]).abs() < 1e-6, "{scaling:?}");
    }
}

#[test]
fn a_constant_divided_by_the_input_ends_the_scaling() {
    let model = model(&[
        graph_node(node("Div", &["one", "x"], &["inverse"])),
        initializer("one", &[1.0]),
        graph_input("x", FLOAT, &[Some(1), Some(3), Some(8), Some(8)]),
        graph_output("inverse", FLOAT, &[Some(1), Some(3), Some(8), Some(8)]),
    ]);
    assert_eq!(read(&model).expect("interface").input_scaling, InputScaling::IDENTITY);
}

#[test]
fn what_is_not_a_model_is_refused() {
    assert!(matches!(read(b""), Err(OnnxError::NotAModel(_))));
    assert!(matches!(read(&crate::protobuf::encode::bytes_field(7, b"")), Err(OnnxError::NotAModel(_))));
    assert!(matches!(read(&[0xff; 4096]), Err(OnnxError::Malformed(_))));
    assert!(matches!(read(b"\x89PNG\r\n\x1a\n"), Err(OnnxError::Malformed(_))));
    let missing = read_file(std::path::Path::new("/nonexistent/model.onnx")).expect_err("missing");
    assert!(missing.to_string().contains("/nonexistent/model.onnx"), "{missing}");
}

#[test]
fn the_bundled_and_test_models_are_read() {
    let ssd = read(&repo_file("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx")).expect("ssd");
    assert_eq!(ssd.inputs.iter().map(ToString::to_string).collect::<Vec<_>>(), ["`image` uint8 [1, 300, 300, 3]"]);
    let names = ssd.outputs.iter().map(|output| output.name.as_str()).collect::<Vec<_>>();
    assert_eq!(names, ["boxes", "scores"]);
    // Nearly all of the bundled model's 24 MB are its weights.
    let file_bytes = repo_file("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx").len() as u64;
    assert!(
        ssd.weight_bytes > file_bytes * 9 / 10 && ssd.weight_bytes <= file_bytes,
        "{} of {file_bytes}",
        ssd.weight_bytes
    );

    let yolo26 = read(&repo_file("tests/models/yolo26t_160_random.onnx")).expect("yolo26");
    assert_eq!(yolo26.describe_outputs(), "`output0` float32 [1, 300, 6]");
    let detr = read(&repo_file("tests/models/rtdetr_tiny_160_random.onnx")).expect("rt-detr");
    assert_eq!(detr.describe_outputs(), "`logits` float32 [1, 100, 80], `pred_boxes` float32 [1, 100, 4]");
}

/// Cases of the property test; see `proptest_support`.
const CASES: u32 = 256;

proptest! {
    #![proptest_config(crate::proptest_support::config(CASES))]

    #[test]
    fn mutated_models_give_an_error_or_an_interface(
        cut in 0usize..2000,
        flips in prop::collection::vec((0usize..2000, any::<u8>()), 0..8),
    ) {
        let mut bytes = model(&[
            graph_node(constant_float("c", 255.0)),
            graph_node(node("Div", &["images", "c"], &["x"])),
            graph_node(node("Sigmoid", &["x"], &["y"])),
            initializer("mean", &[1.0, 2.0, 3.0]),
            graph_input("images", FLOAT, &[None, Some(3), Some(640), Some(640)]),
            graph_output("y", FLOAT, &[Some(1), Some(300), Some(6)]),
        ]);
        for (at, value) in flips {
            let len = bytes.len();
            bytes[at % len] ^= value;
        }
        bytes.truncate(cut.max(1));
        let _ = read(&bytes);
    }

    #[test]
    fn random_bytes_give_an_error_or_an_interface(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = read(&bytes);
    }
}
