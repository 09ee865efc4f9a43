use super::*;
use crate::config::Config;
use crate::onnx::interface::{InputScaling, TensorInfo};

fn repo_model(path: &str) -> ModelInterface {
    crate::onnx::read::read_file(std::path::Path::new(&format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))).expect(path)
}

fn tensor(name: &str, dims: &[u64]) -> TensorInfo {
    TensorInfo {
        name: name.into(),
        element: ElementType::Float,
        dims: Some(dims.iter().map(|&dim| Dim::Fixed(dim)).collect()),
        producer: None,
    }
}

fn outputs(outputs: Vec<TensorInfo>) -> ModelInterface {
    ModelInterface {
        inputs: vec![tensor("images", &[1, 3, 640, 640])],
        outputs,
        input_scaling: InputScaling::IDENTITY,
        producer: "test".into(),
        weight_bytes: 0,
    }
}

fn kind_of(interface: &ModelInterface, labels: Option<usize>) -> DecoderKind {
    recognise_decoder(interface, labels).expect("recognised").kind
}

#[test]
fn the_bundled_ssd_is_recognised_with_exactly_the_default_configs_contract() {
    let interface = repo_model("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx");
    let config = Config::embedded_default().expect("embedded config");
    let decoder = recognise_decoder(&interface, Some(90)).expect("recognised");
    assert_eq!(decoder.kind, config.model.decoder);
    assert!(decoder.why.contains("SSD"), "{}", decoder.why);
    let input = recognise_input(&interface, Some(decoder.kind)).expect("input");
    let expected = PreprocessSpec { name: None, ..config.model.input.clone() };
    assert_eq!(input.input, expected);
    assert!(input.value_range.contains("uint8"), "{}", input.value_range);
}

#[test]
fn yolo26_is_recognised_as_nms_free_with_a_letterboxed_unit_range_input() {
    let interface = repo_model("tests/models/yolo26t_160_random.onnx");
    let decoder = recognise_decoder(&interface, None).expect("recognised");
    assert_eq!(decoder.kind, DecoderKind::NmsFree);
    assert!(decoder.why.contains("`output0` float32 [1, 300, 6]"), "{}", decoder.why);
    let input = recognise_input(&interface, Some(decoder.kind)).expect("input").input;
    assert_eq!(
        (input.width, input.height, input.layout, input.dtype),
        (160, 160, TensorLayout::Nchw, TensorDtype::F32)
    );
    assert_eq!((input.resize, input.filter, input.pad), (ResizeKind::Letterbox, ResizeFilter::Bilinear, 114));
    assert_eq!((input.mean, input.std), ([0.0; 3], [255.0; 3]));
}

#[test]
fn yolo11_is_recognised_as_channel_major_yolov8() {
    let interface = repo_model("tests/models/yolo11t_160_random.onnx");
    let decoder = recognise_decoder(&interface, None).expect("recognised");
    assert_eq!(decoder.kind, DecoderKind::Yolov8);
    assert!(decoder.why.contains("80 classes"), "{}", decoder.why);
}

#[test]
fn rt_detr_is_recognised_with_sigmoid_scores_and_a_stretched_input() {
    let interface = repo_model("tests/models/rtdetr_tiny_160_random.onnx");
    let decoder = recognise_decoder(&interface, Some(80)).expect("recognised");
    assert_eq!((decoder.kind, decoder.class_scores), (DecoderKind::Detr, ClassScores::Sigmoid));
    let input = recognise_input(&interface, Some(decoder.kind)).expect("input").input;
    assert_eq!((input.width, input.resize, input.filter), (160, ResizeKind::Stretch, ResizeFilter::Antialias));
    assert_eq!(input.std, [255.0; 3]);
}

#[test]
fn detr_scores_follow_the_graph_then_the_label_count() {
    let detr = |producer: Option<&str>| {
        let mut logits = tensor("logits", &[1, 100, 92]);
        logits.producer = producer.map(str::to_string);
        outputs(vec![logits, tensor("pred_boxes", &[1, 100, 4])])
    };
    let scores_of =
        |interface: &ModelInterface, labels| recognise_decoder(interface, labels).expect("detr").class_scores;
    assert_eq!(scores_of(&detr(None), Some(91)), ClassScores::Softmax, "one column more than labels: no-object");
    assert_eq!(scores_of(&detr(None), Some(92)), ClassScores::Sigmoid);
    assert_eq!(scores_of(&detr(None), None), ClassScores::Sigmoid);
    assert_eq!(scores_of(&detr(Some("Sigmoid")), Some(91)), ClassScores::Probabilities);

    let rf_detr = outputs(vec![tensor("dets", &[1, 300, 4]), tensor("labels", &[1, 300, 91])]);
    assert_eq!(kind_of(&rf_detr, Some(91)), DecoderKind::Detr);
    let input = recognise_input(&rf_detr, Some(DecoderKind::Detr)).expect("input");
    assert_eq!(input.input.mean, IMAGENET_MEAN, "RF-DETR is fed ImageNet-normalised pixels");
}

#[test]
fn two_unnamed_outputs_are_ssd_anchors_or_detr_queries_by_their_count() {
    let anchors = outputs(vec![tensor("a", &[1, 1917, 4]), tensor("b", &[1, 1917, 91])]);
    assert_eq!(kind_of(&anchors, None), DecoderKind::Ssd);
    let queries = outputs(vec![tensor("b", &[1, 300, 80]), tensor("a", &[1, 300, 4])]);
    assert_eq!(kind_of(&queries, None), DecoderKind::Detr);
}

#[test]
fn yolo_heads_are_told_apart_by_their_shapes_and_labels() {
    assert_eq!(kind_of(&outputs(vec![tensor("output0", &[1, 84, 8400])]), None), DecoderKind::Yolov8);
    assert_eq!(kind_of(&outputs(vec![tensor("output0", &[1, 25200, 85])]), None), DecoderKind::Yolov5);
    assert_eq!(kind_of(&outputs(vec![tensor("output0", &[1, 8400, 84])]), Some(80)), DecoderKind::Yolov8);
    assert_eq!(kind_of(&outputs(vec![tensor("output0", &[1, 25200, 6])]), Some(1)), DecoderKind::Yolov5);
    assert_eq!(kind_of(&outputs(vec![tensor("output0", &[1, 300, 6])]), None), DecoderKind::NmsFree);
    let with_raw_heads = outputs(vec![
        tensor("output0", &[1, 25200, 85]),
        tensor("onnx::Sigmoid_1", &[1, 3, 80, 80, 85]),
        tensor("onnx::Sigmoid_2", &[1, 3, 40, 40, 85]),
    ]);
    assert_eq!(kind_of(&with_raw_heads, None), DecoderKind::Yolov5);

    let mut batched = tensor("output0", &[1, 300, 6]);
    batched.dims.as_mut().expect("dims")[0] = Dim::Symbolic;
    assert_eq!(kind_of(&outputs(vec![batched]), None), DecoderKind::NmsFree);
}

#[test]
fn end2end_exports_are_recognised_by_names_or_shapes() {
    let named = outputs(vec![
        tensor("num_dets", &[1, 1]),
        tensor("det_boxes", &[1, 100, 4]),
        tensor("det_scores", &[1, 100]),
        tensor("det_classes", &[1, 100]),
    ]);
    assert_eq!(kind_of(&named, None), DecoderKind::End2end);
    let shaped =
        outputs(vec![tensor("a", &[1, 1]), tensor("b", &[1, 100, 4]), tensor("c", &[1, 100]), tensor("d", &[1, 100])]);
    assert_eq!(kind_of(&shaped, None), DecoderKind::End2end);
}

#[test]
fn a_model_that_fits_no_decoder_is_refused_with_its_outputs_and_the_values_to_set() {
    let strange = outputs(vec![tensor("heatmap", &[1, 17, 64, 48])]);
    let message = recognise_decoder(&strange, None).expect_err("no decoder").to_string();
    assert!(message.contains("`heatmap` float32 [1, 17, 64, 48]"), "{message}");
    assert!(message.contains("\"nmsfree\", \"detr\""), "{message}");

    let classifier = repo_model("tests/models/colour_classifier.onnx");
    let message = recognise_decoder(&classifier, Some(3)).expect_err("a classifier").to_string();
    assert!(message.contains("classifier"), "{message}");

    let mut symbolic = tensor("output0", &[1, 84, 8400]);
    symbolic.dims.as_mut().expect("dims")[2] = Dim::Symbolic;
    assert!(recognise_decoder(&outputs(vec![symbolic]), None).is_err(), "a symbolic dimension never decides");
}

#[test]
fn inputs_that_are_not_one_fixed_image_are_refused_naming_what_to_set() {
    let with = |inputs: Vec<TensorInfo>| ModelInterface { inputs, ..outputs(vec![tensor("output0", &[1, 300, 6])]) };
    let error = |interface: &ModelInterface| {
        recognise_input(interface, Some(DecoderKind::NmsFree)).expect_err("refused").to_string()
    };

    let mut dynamic = tensor("images", &[1, 3, 640, 640]);
    dynamic.dims = Some(vec![Dim::Symbolic, Dim::Fixed(3), Dim::Symbolic, Dim::Symbolic]);
    assert!(error(&with(vec![dynamic])).contains("set `[model.input]` `width` and `height`"));
    let two = with(vec![tensor("images", &[1, 3, 640, 640]), tensor("orig_target_sizes", &[1, 2])]);
    assert!(error(&two).contains("orig_target_sizes"));
    assert!(error(&with(vec![tensor("images", &[1, 640, 640])])).contains("not an image batch"));
    let mut integers = tensor("images", &[1, 3, 640, 640]);
    integers.element = ElementType::Int64;
    assert!(error(&with(vec![integers])).contains("int64"));
    assert!(error(&with(Vec::new())).contains("declares no input"));
}

#[test]
fn a_graph_that_divides_by_255_itself_is_fed_pixels() {
    let mut interface = outputs(vec![tensor("output0", &[1, 300, 6])]);
    interface.input_scaling = InputScaling { scale: [1.0 / 255.0; 3], offset: [0.0; 3] };
    let input = recognise_input(&interface, Some(DecoderKind::NmsFree)).expect("input");
    assert_eq!((input.input.mean, input.input.std), ([0.0; 3], [1.0; 3]));
    assert!(input.value_range.contains("scales its input itself"), "{}", input.value_range);
}

#[test]
fn a_classifier_has_one_row_of_scores_per_crop_and_as_many_as_labels() {
    let colour = repo_model("tests/models/colour_classifier.onnx");
    assert_eq!(recognise_classifier(&colour, 3), Ok(ClassScores::Probabilities), "its graph ends in a softmax");
    let message = recognise_classifier(&colour, 4).expect_err("labels").to_string();
    assert!(message.contains("scores 3 classes, but the label file has 4 labels"), "{message}");

    let logits = outputs(vec![tensor("logits", &[1, 1000, 1, 1])]);
    assert_eq!(recognise_classifier(&logits, 1000), Ok(ClassScores::Softmax));
    let detector = repo_model("tests/models/yolo26t_160_random.onnx");
    let message = recognise_classifier(&detector, 80).expect_err("a detector").to_string();
    assert!(message.contains("is not [1, C] or [N, C]") && message.contains("[1, 300, 6]"), "{message}");
    let two = outputs(vec![tensor("a", &[1, 4]), tensor("b", &[1, 5])]);
    let message = recognise_classifier(&two, 3).expect_err("no output of 3 columns").to_string();
    assert!(message.contains("has 2 outputs") && message.contains("none of them one row of 3 scores"), "{message}");
    assert_eq!(recognise_classifier(&two, 5), Ok(ClassScores::Softmax), "`b` scores 5 labels");
}

#[test]
fn the_bundled_mobilenet_v2_is_a_classifier_of_its_logits_with_imagenet_normalised_input() {
    let interface = repo_model("models/mobilenet_v2_imagenet.onnx");
    assert_eq!(recognise_classifier(&interface, 1000), Ok(ClassScores::Softmax), "logits, beside its embedding");
    let input = recognise_input(&interface, None).expect("input");
    assert_eq!(
        (input.input.width, input.input.height, input.input.layout, input.input.dtype),
        (224, 224, TensorLayout::Nchw, TensorDtype::F32)
    );
    assert_eq!((input.input.resize, input.input.filter), (ResizeKind::Stretch, ResizeFilter::Antialias));
    assert_eq!((input.input.mean, input.input.std), (IMAGENET_MEAN, IMAGENET_STD), "{}", input.value_range);
    assert!(input.value_range.contains("ImageNet's 1000 classes"), "{}", input.value_range);
    let colour = recognise_input(&repo_model("tests/models/colour_classifier.onnx"), None).expect("input");
    assert_eq!(colour.input.std, [255.0; 3], "a classifier of other classes keeps 0..1");
}

#[test]
fn the_bundled_nanodet_is_recognised_by_its_stride_outputs_with_a_stretched_unit_range_input() {
    let interface = repo_model("models/nanodet_m_416.onnx");
    let decoder = recognise_decoder(&interface, Some(80)).expect("recognised");
    assert_eq!(decoder.kind, DecoderKind::Nanodet);
    assert!(decoder.why.contains("strides 8, 16, 32 of the 416×416 input"), "{}", decoder.why);
    assert!(decoder.why.contains("80 classes, 11 bins per side"), "{}", decoder.why);
    assert_eq!(kind_of(&interface, None), DecoderKind::Nanodet, "its names pair the outputs without labels");
    let input = recognise_input(&interface, Some(decoder.kind)).expect("input");
    let input = (input.input, input.value_range);
    assert_eq!(
        (input.0.width, input.0.height, input.0.layout, input.0.dtype),
        (416, 416, TensorLayout::Nchw, TensorDtype::F32)
    );
    assert_eq!((input.0.resize, input.0.filter), (ResizeKind::Stretch, ResizeFilter::Antialias));
    assert_eq!((input.0.mean, input.0.std), ([0.0; 3], [255.0; 3]), "{}", input.1);
}

#[test]
fn stride_outputs_without_telling_names_are_nanodet_only_when_the_labels_pair_them() {
    // A 640 input at strides 8, 16: 80² and 40² cells, 3 classes, 8 bins per side.
    let anonymous = outputs(vec![
        tensor("o1", &[1, 6400, 3]),
        tensor("o2", &[1, 6400, 32]),
        tensor("o3", &[1, 1600, 3]),
        tensor("o4", &[1, 1600, 32]),
    ]);
    assert_eq!(kind_of(&anonymous, Some(3)), DecoderKind::Nanodet);
    assert!(recognise_decoder(&anonymous, None).is_err(), "without labels nothing tells scores from distances");
    let off_grid = outputs(vec![
        tensor("cls_0", &[1, 6000, 3]),
        tensor("reg_0", &[1, 6000, 32]),
        tensor("cls_1", &[1, 1600, 3]),
        tensor("reg_1", &[1, 1600, 32]),
    ]);
    assert!(recognise_decoder(&off_grid, Some(3)).is_err(), "6000 rows are no stride's grid of 640×640");
}
