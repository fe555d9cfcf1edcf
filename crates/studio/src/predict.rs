//! Label Studio's predictions from a model: the texts a labeling config's controls label, read
//! from its tasks; the annotator's regions to force on them; and each task's prediction from
//! its texts tagged, with regions to decide where the config has a [`CHECK`] control. The
//! server's `/predict` and the refresher of a project's predictions make them the same way.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nertrain_annotate::CharSpan;
use nertrain_annotate::label_studio::{
    AnnotatorRegions, CHECK, LabelingConfig, Prediction, Target, Task, TextPrediction,
};
use nertrain_select::{Selector, Strategy};
use nertrain_tagger::{TagOptions, Tagged, Tagger, Token};

use crate::Error;
use crate::served::Version;

/// Where a text to tag came from: its task and the object (a `<Text>`'s data key) it is read
/// for.
pub struct Source {
    /// The task, by its place in the request.
    pub task: usize,
    /// The object, by its place in [`objects`].
    pub object: usize,
}

/// A text a config's entity controls label: its data key, and the controls on it (indices of
/// `config.targets`). Each is tagged once per task, however many controls label it; the
/// [`CHECK`] control marks regions to decide, never entities, so it asks for no text.
pub struct Object {
    /// The `<Text>`'s data key.
    pub data_key: String,
    /// The controls on it, by their place in the config's targets.
    pub targets: Vec<usize>,
    /// The `<Text>` name the [`CHECK`] control marks regions on, where the config has one on
    /// this text.
    pub check: Option<String>,
}

/// The objects of `config`'s entity controls, in the config's order.
pub fn objects(config: &LabelingConfig) -> Vec<Object> {
    let mut objects: Vec<Object> = Vec::new();
    for (i, target) in config.targets.iter().enumerate() {
        if target.from_name == CHECK {
            continue;
        }
        match objects.iter_mut().find(|o| o.data_key == target.data_key) {
            Some(object) => object.targets.push(i),
            None => objects.push(Object {
                data_key: target.data_key.clone(),
                targets: vec![i],
                check: None,
            }),
        }
    }
    for object in &mut objects {
        object.check = config
            .targets
            .iter()
            .find(|t| t.from_name == CHECK && t.data_key == object.data_key)
            .map(|t| t.to_name.clone());
    }
    objects
}

/// A bound on the bytes of the predictions of `texts` (each with its tokens), as serialised:
/// each token may start a region (and one of the [`CHECK`] control besides, where the config
/// has one), which names its control, object, label and id and repeats its text (escaped, six
/// bytes a byte at most).
pub fn prediction_size_bound(
    config: &LabelingConfig,
    texts: &[String],
    tokens: &[Vec<Token>],
    tasks: usize,
    model_version: &str,
) -> usize {
    let longest = |f: fn(&Target) -> usize| config.targets.iter().map(f).max().unwrap_or(0);
    let names = longest(|t| t.from_name.len()) + 2 * longest(|t| t.to_name.len());
    let label = longest(|t| t.labels.iter().map(String::len).max().unwrap_or(0));
    let checks = config.targets.iter().any(|t| t.from_name == CHECK);
    let region = (160 + names + label + 6 * 20) * if checks { 2 } else { 1 };
    let regions: usize = texts
        .iter()
        .zip(tokens)
        .map(|(text, tokens)| 6 * text.len() + tokens.len() * region)
        .sum();
    64 + regions + tasks * (96 + 6 * model_version.len())
}

/// A request's texts cut into words, and the regions an annotator has drawn on them, when any.
pub struct Drawn {
    /// The annotator's regions, when the request has any.
    pub context: Option<AnnotatorRegions>,
    /// What the texts were read under.
    pub answering: Arc<Answering>,
    /// The texts.
    pub texts: Vec<String>,
    /// Their words.
    pub tokens: Vec<Vec<Token>>,
    /// Where each came from.
    pub sources: Vec<Source>,
}

impl Drawn {
    /// The entities the annotator drew, to be forced on each text (none without a context),
    /// checked against the texts and their words; the texts are given back.
    pub fn forced(self, tagger: &Tagger) -> Result<(Self, Vec<Vec<CharSpan>>), Error> {
        let forced = forced_spans(
            self.context.as_ref(),
            &self.answering.config,
            &self.answering.objects,
            &self.texts,
            &self.sources,
        )?;
        if !forced.is_empty() {
            tagger
                .check_forced(&self.texts, &self.tokens, &forced)
                .map_err(|e| Error::Unfit(format!("params.context: {e}")))?;
        }
        Ok((self, forced))
    }
}

/// The entities an annotator has drawn (an interactive pre-annotation's `context`), to be
/// forced on each of `texts` (from `sources`); none without a context.
fn forced_spans(
    context: Option<&AnnotatorRegions>,
    config: &LabelingConfig,
    objects: &[Object],
    texts: &[String],
    sources: &[Source],
) -> Result<Vec<Vec<CharSpan>>, Error> {
    let Some(context) = context.filter(|c| !c.is_empty()) else {
        return Ok(Vec::new());
    };
    if sources.iter().any(|s| s.task > 0) {
        return Err(Error::Invalid(
            "params.context: the annotator's regions go with one task, and this request has more"
                .into(),
        ));
    }
    texts
        .iter()
        .zip(sources)
        .map(|(text, source)| {
            let object = &objects[source.object];
            let targets: Vec<&Target> =
                object.targets.iter().map(|&t| &config.targets[t]).collect();
            context
                .spans_on(&targets, text)
                .map_err(|e| Error::Unfit(format!("params.{e}")))
        })
        .collect()
}

/// A text of a task, its entities kept (each with its target and confidence), and where it has
/// a [`CHECK`] control, the `<Text>` it marks and the regions to decide there (code points).
type TextSpans = (
    String,
    Vec<(usize, CharSpan, f64)>,
    Option<(String, Vec<(usize, usize)>)>,
);

/// What every group of tasks of an answer shares: the labeling config the texts are read under (its
/// labels checked against the model's), how tasks are scored, the version that answers, and
/// the entities left out across the groups.
pub struct Answering {
    /// The labeling config.
    config: Arc<LabelingConfig>,
    /// Its objects.
    objects: Arc<Vec<Object>>,
    /// The strategy whose worth makes a task's score.
    strategy: Strategy,
    /// The answering weights' id.
    model_version: String,
    /// Entities of labels the config lacks, left out.
    left_out: AtomicUsize,
}

impl Answering {
    /// Answers for tasks read under `config` by `version`, scored by `strategy`; refused when
    /// the config labels nothing the model finds.
    pub fn new(
        config: Arc<LabelingConfig>,
        strategy: Strategy,
        version: &Version,
    ) -> Result<Self, String> {
        config.check_labels(&version.info.labels)?;
        let objects = Arc::new(objects(&config));
        Ok(Self {
            config,
            objects,
            strategy,
            model_version: version.id.clone(),
            left_out: AtomicUsize::new(0),
        })
    }

    /// The config the tasks are read under.
    pub fn config(&self) -> &Arc<LabelingConfig> {
        &self.config
    }

    /// The config's objects, the texts of each task to tag.
    pub fn objects(&self) -> &Arc<Vec<Object>> {
        &self.objects
    }

    /// Whether the config shows regions to decide (has a [`CHECK`] control).
    pub fn checks(&self) -> bool {
        self.objects.iter().any(|o| o.check.is_some())
    }

    /// What the texts are tagged with for their predictions: entity confidences, what the
    /// strategy's task score needs, and marginals where regions to decide are shown.
    pub fn tag_options(&self, tagger: &Tagger) -> TagOptions {
        let options = self.strategy.options(tagger.options());
        TagOptions {
            confidence: true,
            marginals: options.marginals || self.checks(),
            ..options
        }
    }

    /// Every object's text of every task of `tasks`, blank ones left out (they have no
    /// entities), with where each came from.
    pub fn texts_to_tag(&self, tasks: &[Task]) -> Result<(Vec<String>, Vec<Source>), Error> {
        let mut texts = Vec::new();
        let mut sources = Vec::new();
        for (t, task) in tasks.iter().enumerate() {
            for (o, object) in self.objects.iter().enumerate() {
                let target = &self.config.targets[object.targets[0]];
                let text = task.text_for(target, t).map_err(Error::Invalid)?;
                if !text.trim().is_empty() {
                    texts.push(text.to_string());
                    sources.push(Source { task: t, object: o });
                }
            }
        }
        Ok((texts, sources))
    }

    /// How many entities were left out so far, for want of their label in the config.
    pub fn left_out(&self) -> usize {
        self.left_out.load(Ordering::Relaxed)
    }

    /// The group of the answer's tasks `tasks` (by their place in the request; their ids
    /// in Label Studio `task_ids`, where they have one), whose texts came from `sources`, with
    /// regions to decide cut at `cut`.
    pub fn group(
        self: &Arc<Self>,
        tasks: Range<usize>,
        task_ids: Vec<Option<i64>>,
        sources: Vec<Source>,
        cut: f64,
    ) -> TaskGroup {
        TaskGroup {
            tasks,
            task_ids,
            sources,
            cut,
            answering: self.clone(),
        }
    }
}

/// Tasks answered together: their predictions from their texts tagged.
pub struct TaskGroup {
    /// The tasks, by their place in the request.
    tasks: Range<usize>,
    /// Their ids in Label Studio, where they have one.
    task_ids: Vec<Option<i64>>,
    /// Where each text of the group came from.
    sources: Vec<Source>,
    /// A token less sure than this is in a region to decide, on a text with a [`CHECK`] control.
    cut: f64,
    /// What the groups of the answer share.
    answering: Arc<Answering>,
}

impl TaskGroup {
    /// The tasks' predictions.
    pub fn answer(self, tagged: Vec<Tagged>, tagger: &Tagger) -> Vec<Prediction> {
        let shared = &*self.answering;
        let selector = Selector::new(tagger);
        let mut predictions = Vec::with_capacity(self.tasks.len());
        let mut texts = self.sources.iter().zip(tagged).peekable();
        for (n, task) in self.tasks.clone().enumerate() {
            let mut certainty: f64 = 1.0;
            let mut spans: Vec<TextSpans> = Vec::new();
            while let Some((source, tagged)) = texts.next_if(|(s, _)| s.task == task) {
                let object = &shared.objects[source.object];
                let cut = object.check.is_some().then_some(self.cut);
                let pre = selector.pre_annotate(tagged, shared.strategy, cut);
                // A task is as sure as its least sure text.
                certainty = certainty.min(pre.score);
                let mut kept = Vec::new();
                for (span, confidence) in pre.entities {
                    // The first control on the text with the entity's label takes it.
                    let taker = object
                        .targets
                        .iter()
                        .find(|&&t| shared.config.targets[t].labels.contains(&span.label));
                    if let Some(&target) = taker {
                        kept.push((target, span, confidence));
                    } else {
                        shared.left_out.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let checked = object.check.clone().map(|to_name| (to_name, pre.regions));
                spans.push((pre.text, kept, checked));
            }
            let id = self.task_ids[n].map_or_else(|| format!("t{task}"), |id| id.to_string());
            let texts: Vec<TextPrediction> = spans
                .iter()
                .map(|(text, kept, checked)| TextPrediction {
                    text,
                    entities: kept
                        .iter()
                        .map(|(target, span, p)| (&shared.config.targets[*target], span, *p))
                        .collect(),
                    checks: checked
                        .as_ref()
                        .map(|(to_name, regions)| (&to_name[..], &regions[..])),
                })
                .collect();
            predictions.push(Prediction::of_texts(
                &id,
                &shared.model_version,
                certainty,
                &texts,
            ));
        }
        predictions
    }
}
