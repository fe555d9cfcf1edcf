//! A Label Studio project's labeling config: which `<Labels>` control labels which `<Text>`
//! object, and the task data key the text is read from (`value="$key"`).

use std::collections::HashMap;

use super::CHECK;

/// One `<Labels>` control on a `<Text>` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The control's `name`: a region's `from_name`.
    pub from_name: String,
    /// The object's `name`: a region's `to_name`.
    pub to_name: String,
    /// The task data key of the object's text.
    pub data_key: String,
    /// The control's labels (each `<Label value>`).
    pub labels: Vec<String>,
}

impl Target {
    /// The names of Label Studio's default named-entity config, `<Labels name="label"
    /// toName="text">` on `<Text name="text" value="$text">`, with any label.
    pub fn default_ner() -> Self {
        Self {
            from_name: "label".into(),
            to_name: "text".into(),
            data_key: "text".into(),
            labels: Vec::new(),
        }
    }
}

impl Target {
    /// Checks that the model finds at least one of this control's labels; otherwise says which
    /// labels each side has.
    pub fn check_labels(&self, model_labels: &[String]) -> Result<(), String> {
        shares_labels(std::slice::from_ref(self), model_labels)
    }
}

/// Whether the model finds a label of `targets`, or what each side has.
fn shares_labels(targets: &[Target], model_labels: &[String]) -> Result<(), String> {
    let shared = targets
        .iter()
        .flat_map(|t| &t.labels)
        .any(|l| model_labels.contains(l));
    if shared {
        return Ok(());
    }
    let mut config: Vec<&str> = targets
        .iter()
        .flat_map(|t| t.labels.iter().map(String::as_str))
        .collect();
    config.dedup();
    Err(format!(
        "none of the labeling config's labels ({}) is one the model finds ({}); name the \
         <Label> values as the model does",
        config.join(", "),
        model_labels.join(", ")
    ))
}

/// What a labeling config asks a text tagger for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelingConfig {
    /// Every `<Labels>` control on a `<Text>` object, in the config's order.
    pub targets: Vec<Target>,
}

/// A `<Text>` object: its data key, or why its text cannot be read.
type Object = Result<String, String>;

impl LabelingConfig {
    /// Reads a labeling config. An error says what the config lacks for a text tagger.
    pub fn parse(xml: &str) -> Result<Self, String> {
        let document = roxmltree::Document::parse(xml)
            .map_err(|e| format!("the labeling config is not XML: {e}"))?;
        // Label Studio reads tag names whatever their case.
        let is = |node: &roxmltree::Node, name: &str| {
            node.is_element() && node.tag_name().name().eq_ignore_ascii_case(name)
        };
        let mut objects: HashMap<&str, Object> = HashMap::new();
        for node in document.descendants().filter(|n| is(n, "Text")) {
            let Some(name) = node.attribute("name") else {
                continue;
            };
            let object = match node.attribute("value") {
                _ if node
                    .attribute("valueType")
                    .is_some_and(|t| t.eq_ignore_ascii_case("url")) =>
                {
                    Err(format!(
                        "<Text name=\"{name}\"> reads its text from a URL (valueType=\"url\"); \
                         put the text itself in the task"
                    ))
                }
                Some(value) => match value.strip_prefix('$') {
                    Some(key) if !key.is_empty() => Ok(key.to_string()),
                    _ => Err(format!(
                        "<Text name=\"{name}\"> has value=\"{value}\", not a task data key \
                         (value=\"$key\")"
                    )),
                },
                None => Err(format!("<Text name=\"{name}\"> has no value=\"$key\"")),
            };
            objects.insert(name, object);
        }
        let mut targets = Vec::new();
        let mut problems = Vec::new();
        for node in document.descendants().filter(|n| is(n, "Labels")) {
            let (Some(from_name), Some(to_names)) =
                (node.attribute("name"), node.attribute("toName"))
            else {
                continue;
            };
            let labels: Vec<String> = node
                .children()
                .filter(|n| is(n, "Label"))
                .filter_map(|n| n.attribute("value").map(str::to_string))
                .collect();
            for to_name in to_names.split(',').map(str::trim) {
                match objects.get(to_name) {
                    Some(Ok(key)) => targets.push(Target {
                        from_name: from_name.to_string(),
                        to_name: to_name.to_string(),
                        data_key: key.clone(),
                        labels: labels.clone(),
                    }),
                    Some(Err(problem)) => problems.push(problem.clone()),
                    None => {}
                }
            }
        }
        if targets.is_empty() {
            let why = if problems.is_empty() {
                String::new()
            } else {
                format!(" ({})", problems.join("; "))
            };
            return Err(format!(
                "the labeling config has no <Labels> control on a <Text> object{why}; a named \
                 entity config looks like <View><Labels name=\"label\" toName=\"text\"><Label \
                 value=\"PER\"/></Labels><Text name=\"text\" value=\"$text\"/></View>"
            ));
        }
        Ok(Self { targets })
    }

    /// The one control that labels entities (any but [`CHECK`]), and whether the config has the
    /// [`CHECK`] control on the same `<Text>`; an error when there is none, or more than one
    /// and which one is meant is not known.
    pub fn entity_target(&self) -> Result<(&Target, bool), String> {
        let entities: Vec<&Target> = self
            .targets
            .iter()
            .filter(|t| t.from_name != CHECK)
            .collect();
        let target = match entities.as_slice() {
            [target] => *target,
            [] => {
                return Err(format!(
                    "the labeling config's only <Labels> control is `{CHECK}`, which marks \
                     regions to decide; add one for the entities"
                ));
            }
            _ => {
                let names: Vec<String> = entities
                    .iter()
                    .map(|t| format!("{} on {}", t.from_name, t.to_name))
                    .collect();
                return Err(format!(
                    "the labeling config has {} <Labels> controls on <Text> objects ({}); \
                     tasks are written for a config with one",
                    names.len(),
                    names.join(", ")
                ));
            }
        };
        let check = self
            .targets
            .iter()
            .any(|t| t.from_name == CHECK && t.to_name == target.to_name);
        Ok((target, check))
    }

    /// Checks that the model finds at least one of the config's labels; otherwise says which
    /// labels each side has.
    pub fn check_labels(&self, model_labels: &[String]) -> Result<(), String> {
        shares_labels(&self.targets, model_labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_labels_control_its_text_and_the_data_key() {
        let config = LabelingConfig::parse(
            r#"<View>
                 <Header value="Read it"/>
                 <labels name="ner" toName="doc">
                   <Label value="PER" background="red"/><Label value="ORG"/>
                 </labels>
                 <Text name="doc" value="$body"/>
                 <Choices name="c" toName="doc"><Choice value="x"/></Choices>
               </View>"#,
        )
        .unwrap();
        assert_eq!(
            config.targets,
            [Target {
                from_name: "ner".into(),
                to_name: "doc".into(),
                data_key: "body".into(),
                labels: vec!["PER".into(), "ORG".into()],
            }]
        );
        assert!(config.check_labels(&["LOC".into(), "PER".into()]).is_ok());
        let error = config.check_labels(&["LOC".into()]).unwrap_err();
        assert!(
            error.contains("(PER, ORG)") && error.contains("(LOC)"),
            "{error}"
        );
    }

    #[test]
    fn says_what_a_config_lacks() {
        let no_labels = LabelingConfig::parse(
            r#"<View><Choices name="c" toName="t"/><Text name="t" value="$text"/></View>"#,
        )
        .unwrap_err();
        assert!(
            no_labels.contains("no <Labels> control on a <Text>"),
            "{no_labels}"
        );
        let image = LabelingConfig::parse(
            r#"<View><Labels name="l" toName="i"><Label value="PER"/></Labels><Image name="i" value="$img"/></View>"#,
        )
        .unwrap_err();
        assert!(image.contains("no <Labels> control"), "{image}");
        let url = LabelingConfig::parse(
            r#"<View><Labels name="l" toName="t"><Label value="PER"/></Labels><Text name="t" value="$u" valueType="url"/></View>"#,
        )
        .unwrap_err();
        assert!(url.contains("valueType=\"url\""), "{url}");
        let literal = LabelingConfig::parse(
            r#"<View><Labels name="l" toName="t"><Label value="PER"/></Labels><Text name="t" value="hello"/></View>"#,
        )
        .unwrap_err();
        assert!(literal.contains("not a task data key"), "{literal}");
        let broken = LabelingConfig::parse("<View><Labels>").unwrap_err();
        assert!(
            broken.starts_with("the labeling config is not XML"),
            "{broken}"
        );
    }

    #[test]
    fn the_entity_target_is_the_one_control_besides_check() {
        let text = r#"<Text name="doc" value="$body"/>"#;
        let labels = |name: &str, to: &str| {
            format!(r#"<Labels name="{name}" toName="{to}"><Label value="PER"/></Labels>"#)
        };
        let parse = |parts: &[String]| {
            LabelingConfig::parse(&format!("<View>{}{text}</View>", parts.concat())).unwrap()
        };
        let config = parse(&[labels("check", "doc"), labels("ner", "doc")]);
        let (target, check) = config.entity_target().unwrap();
        assert_eq!((target.from_name.as_str(), check), ("ner", true));
        let config = parse(&[labels("ner", "doc")]);
        assert!(!config.entity_target().unwrap().1);
        let two = parse(&[labels("ner", "doc"), labels("more", "doc")]);
        let error = two.entity_target().unwrap_err();
        assert!(error.contains("2 <Labels> controls"), "{error}");
        let only_check = parse(&[labels("check", "doc")]);
        assert!(only_check.entity_target().is_err());
    }
}
