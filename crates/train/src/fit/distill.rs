//! A run's teachers (`[distill]`): the trained models whose distributions over tag paths a
//! student learns from, loaded and checked before anything of the run is written, the
//! unlabelled text read as they cut it, and their marginals of every training sentence over the
//! student's tags, taken once.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;
use nertrain_data::{
    ColumnSpec, Corpus, Encoded, Label, TagScheme, TeacherMarginals, Tokenizer, Vocab,
    read_unlabelled,
};
use nertrain_model::{Distillation, FileSummary, ModelFiles, ModelMeta, TeacherSummary};
use nertrain_tagger::Tagger;

use super::events::{FitEvent, FitOptions};
use crate::{Error, Experiment, Result};

/// A teacher, loaded.
struct Teacher {
    /// Its directory, as the experiment names it.
    path: PathBuf,
    tagger: Tagger,
    weights_id: String,
}

/// The teachers of a run, as `[distill]` names them.
pub(super) struct Teachers {
    teachers: Vec<Teacher>,
    temperature: f64,
    weight: f64,
}

impl Teachers {
    /// The experiment's teachers, each loaded whole (reading a frozen encoder's layers through
    /// `options.encoder_cache` when given); `None` without any. One that cannot be read is an
    /// error naming it.
    pub(super) fn load(
        experiment: &Experiment,
        options: &FitOptions,
        device: &Device,
        events: &mut dyn FnMut(FitEvent),
    ) -> Result<Option<Self>> {
        let distill = &experiment.distill;
        if distill.teachers.is_empty() {
            return Ok(None);
        }
        let teachers = distill
            .teachers
            .iter()
            .map(|path| -> Result<Teacher> {
                let refused = |e: &dyn std::fmt::Display| teacher_error(path, e);
                let mut tagger = Tagger::load(path, device).map_err(|e| refused(&e))?;
                if let Some(root) = &options.encoder_cache {
                    tagger = tagger
                        .with_encoder_cache(root, experiment.train.backend)
                        .map_err(|e| refused(&e))?;
                }
                let weights_id = ModelFiles::new(path)
                    .weights_id()
                    .map_err(|e| refused(&e))?;
                events(FitEvent::info(format!(
                    "teacher {}: weights {weights_id}, {} tags ({})",
                    path.display(),
                    tagger.vocab().tags.len(),
                    tagger.meta().train_scheme,
                )));
                Ok(Teacher {
                    path: path.clone(),
                    tagger,
                    weights_id,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(Self {
            teachers,
            temperature: distill.temperature,
            weight: distill.weight,
        }))
    }

    /// The unlabelled files (`[distill] unlabelled`), raw text cut into words as the first
    /// teacher cuts text; every teacher must cut it so, or they would read other words.
    pub(super) fn read_unlabelled(
        &self,
        files: &[PathBuf],
        columns: &ColumnSpec,
    ) -> Result<Vec<Corpus<Label>>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let first = &self.teachers[0];
        let cut = first.tagger.meta().tokenizer.as_ref();
        if let Some(other) = self.teachers[1..]
            .iter()
            .find(|t| t.tagger.meta().tokenizer.as_ref() != cut)
        {
            return Err(teacher_error(
                &other.path,
                &format!(
                    "cuts text into words unlike the first teacher, {}, so that they would \
                     read raw unlabelled text as other words; expected teachers trained on \
                     text cut alike",
                    first.path.display()
                ),
            ));
        }
        let tokenizer: &Tokenizer = first.tagger.tokenizer();
        files
            .iter()
            .map(|path| Ok(read_unlabelled(path, columns, tokenizer)?))
            .collect()
    }

    /// For each teacher, the student's id of each of its tag ids: they must have the same tags
    /// in the same scheme, else the teacher is refused naming both.
    fn tag_maps(&self, student: &Vocab, scheme: TagScheme) -> Result<Vec<Vec<usize>>> {
        self.teachers
            .iter()
            .map(|teacher| {
                let tags = &teacher.tagger.vocab().tags;
                let their_scheme = teacher.tagger.meta().train_scheme;
                let ids: Option<Vec<usize>> =
                    tags.items().iter().map(|tag| student.id(tag)).collect();
                match ids {
                    Some(ids) if their_scheme == scheme && tags.len() == student.len() => Ok(ids),
                    _ => Err(teacher_error(
                        &teacher.path,
                        &format!(
                            "its tags are {} {:?}, the student's {} {:?}; expected the same \
                             tags in the same scheme",
                            their_scheme,
                            sorted(tags.items()),
                            scheme,
                            sorted(student.items())
                        ),
                    )),
                }
            })
            .collect()
    }

    /// Sets `encoded`'s teachers' marginals (`corpus`'s sentences, of the student's `tags` in
    /// `scheme`): the average of the teachers', each read as it reads a file, conditioned on
    /// the tags a partially labelled sentence has.
    pub(super) fn set_marginals(
        &self,
        encoded: &mut [Encoded],
        corpus: &Corpus<Label>,
        (tags, scheme): (&Vocab, TagScheme),
        events: &mut dyn FnMut(FitEvent),
    ) -> Result<()> {
        let maps = self.tag_maps(tags, scheme)?;
        let started = Instant::now();
        let mut each = Vec::with_capacity(self.teachers.len());
        for (teacher, map) in self.teachers.iter().zip(&maps) {
            let allowed: Vec<Option<Vec<bool>>> =
                encoded.iter().map(|s| allowed_of(s, map)).collect();
            let marginals = teacher
                .tagger
                .teacher_marginals(corpus, self.temperature, &allowed)
                .map_err(|e| teacher_error(&teacher.path, &e))?;
            each.push(marginals.into_iter().map(|m| in_student_ids(m, map)));
        }
        for (i, sentence) in encoded.iter_mut().enumerate() {
            let of_sentence: Vec<TeacherMarginals> =
                each.iter_mut().flat_map(Iterator::next).collect();
            let average = TeacherMarginals::average(&of_sentence)
                .filter(|m| m.time == sentence.len() && of_sentence.len() == maps.len())
                .ok_or_else(|| {
                    let at = &corpus.sentences[i];
                    Error::from(nertrain_data::DataError::at(
                        &corpus.path,
                        at.first_line,
                        "the teachers read this sentence as another number of words",
                    ))
                })?;
            sentence.teacher = Some(average);
        }
        events(FitEvent::info(format!(
            "teachers' marginals of {} sentences ({} teacher{}, temperature {}) in {:.1}s",
            encoded.len(),
            self.teachers.len(),
            if self.teachers.len() == 1 { "" } else { "s" },
            self.temperature,
            started.elapsed().as_secs_f64()
        )));
        Ok(())
    }

    /// Records the distillation in a new run's `meta`; a resumed run's must name these
    /// teachers' weights.
    pub(super) fn describe(
        &self,
        meta: &mut ModelMeta,
        resume: bool,
        unlabelled: &[FileSummary],
        run: &Path,
    ) -> Result<()> {
        if resume {
            return self.check_resumed(meta.distilled.as_ref(), run);
        }
        meta.distilled = Some(self.summary(unlabelled));
        Ok(())
    }

    /// What `model.json` records of the distillation.
    fn summary(&self, unlabelled: &[FileSummary]) -> Distillation {
        Distillation {
            teachers: (self.teachers.iter())
                .map(|t| TeacherSummary {
                    path: t.path.clone(),
                    weights_id: t.weights_id.clone(),
                })
                .collect(),
            weight: self.weight,
            temperature: self.temperature,
            unlabelled: unlabelled.to_vec(),
        }
    }

    /// A resumed run goes on learning from the teachers it began with: each must have the
    /// weights `model.json` recorded, or the run would not be the one it was.
    fn check_resumed(&self, recorded: Option<&Distillation>, run: &Path) -> Result<()> {
        let recorded: Vec<&str> = recorded.map_or(Vec::new(), |d| {
            d.teachers.iter().map(|t| t.weights_id.as_str()).collect()
        });
        let now: Vec<&str> = self
            .teachers
            .iter()
            .map(|t| t.weights_id.as_str())
            .collect();
        if recorded == now {
            return Ok(());
        }
        Err(Error::refused(
            run,
            format!(
                "the run was distilled from teachers of weights {recorded:?}; [distill] teachers \
                 now have {now:?}: resuming would mix two runs (start a new one)"
            ),
        ))
    }
}

/// A teacher refused: its directory and why.
fn teacher_error(path: &Path, why: &dyn std::fmt::Display) -> Error {
    Error::refused(path, format!("teacher: {why}"))
}

/// Tags in order, for messages.
fn sorted(tags: &[String]) -> Vec<&str> {
    let mut tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    tags.sort_unstable();
    tags
}

/// A partially labelled sentence's allowed tags in a teacher's ids (`map`: the student's id of
/// each); `None` where every token may have any tag.
fn allowed_of(sentence: &Encoded, map: &[usize]) -> Option<Vec<bool>> {
    if sentence.allowed.iter().all(|tags| tags.iter().all(|&a| a)) {
        return None;
    }
    let teacher_tags = |tags: &[bool]| map.iter().map(|&s| tags[s]).collect::<Vec<_>>();
    Some(
        sentence
            .allowed
            .iter()
            .flat_map(|tags| teacher_tags(tags))
            .collect(),
    )
}

/// A teacher's marginals over the student's tag ids (`map`: the student's id of each of the
/// teacher's).
fn in_student_ids(marginals: TeacherMarginals, map: &[usize]) -> TeacherMarginals {
    let k = marginals.tags;
    let mut unary = vec![0.0; marginals.unary.len()];
    for (row, out) in marginals.unary.chunks(k).zip(unary.chunks_mut(k)) {
        for (t, &p) in row.iter().enumerate() {
            out[map[t]] = p;
        }
    }
    let mut pairwise = vec![0.0; marginals.pairwise.len()];
    for (block, out) in marginals
        .pairwise
        .chunks(k * k)
        .zip(pairwise.chunks_mut(k * k))
    {
        for (i, row) in block.chunks(k).enumerate() {
            for (j, &p) in row.iter().enumerate() {
                out[map[i] * k + map[j]] = p;
            }
        }
    }
    TeacherMarginals {
        unary,
        pairwise,
        ..marginals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marginals_are_moved_to_the_students_ids() {
        // Teacher tags [a, b], student [b, a].
        let teacher = TeacherMarginals {
            rows: 1,
            time: 2,
            tags: 2,
            unary: vec![0.9, 0.1, 0.3, 0.7],
            pairwise: vec![0.25, 0.65, 0.05, 0.05],
        };
        let student = in_student_ids(teacher, &[1, 0]);
        assert_eq!(student.unary, [0.1, 0.9, 0.7, 0.3]);
        // p(a→b) = 0.65 is the student's (1 → 0).
        assert_eq!(student.pairwise, [0.05, 0.05, 0.65, 0.25]);
    }

    #[test]
    fn allowed_tags_are_moved_to_the_teachers_ids() {
        let sentence = Encoded {
            allowed: vec![vec![true, false, false], vec![true, true, true]],
            ..Encoded::default()
        };
        // Teacher tag t is the student's map[t].
        assert_eq!(
            allowed_of(&sentence, &[2, 0, 1]),
            Some(vec![false, true, false, true, true, true])
        );
        let free = Encoded {
            allowed: vec![vec![true; 3]; 2],
            ..Encoded::default()
        };
        assert_eq!(allowed_of(&free, &[2, 0, 1]), None);
    }
}
