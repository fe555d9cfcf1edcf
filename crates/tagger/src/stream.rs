//! Tagging texts that come one at a time, without end: a chunk of them at a time ([`Chunker`]),
//! so that memory stays bounded and a caller can stop, write or check for Ctrl-C between two,
//! with the output in the order of the input. `tag --input`, Python's `Tagger.tag`, `select` and
//! Ray's workers all tag through it, so they cut the same texts alike.

use crate::{Chunker, Error, Layout, Result, TagOptions, Tagged, Tagger};

/// The texts of an iterator tagged a chunk at a time: each item is a chunk's [`Tagged`], in
/// order ([`Tagger::tag_stream`]). After an error it ends.
pub struct TagStream<'a, S, I> {
    tagger: &'a Tagger,
    texts: I,
    layout: Layout,
    options: TagOptions,
    chunker: Chunker,
    /// Texts handed out before the next chunk, to name a text by its place in the input.
    done: usize,
    ended: bool,
    chunk: Vec<S>,
}

impl Tagger {
    /// Tags `texts` as [`Self::tag`] does, a chunk at a time: each item is a chunk's texts
    /// tagged, in the order of `texts`. A text that fails to come (an input error) ends the
    /// stream with that error; a text of too many words is named by its place in `texts`.
    /// Other threads' calls may run between two chunks.
    pub fn tag_stream<S, I>(
        &self,
        texts: I,
        layout: Layout,
        options: TagOptions,
    ) -> TagStream<'_, S, I::IntoIter>
    where
        S: AsRef<str> + Sync,
        I: IntoIterator<Item = Result<S>>,
    {
        TagStream {
            tagger: self,
            texts: texts.into_iter(),
            layout,
            options,
            chunker: Chunker::new(layout, self.reads_documents()),
            done: 0,
            ended: false,
            chunk: Vec::new(),
        }
    }
}

impl<S, I> Iterator for TagStream<'_, S, I>
where
    S: AsRef<str> + Sync,
    I: Iterator<Item = Result<S>>,
{
    type Item = Result<Vec<Tagged>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        self.chunk.clear();
        for text in self.texts.by_ref() {
            let text = match text {
                Ok(text) => text,
                Err(error) => {
                    self.ended = true;
                    return Some(Err(error));
                }
            };
            let ends = self.chunker.ends_after(text.as_ref());
            self.chunk.push(text);
            if ends {
                break;
            }
        }
        if self.chunk.is_empty() {
            self.ended = true;
            return None;
        }
        let first = self.done;
        self.done += self.chunk.len();
        let tagged = self
            .tagger
            .tag(&self.chunk, self.layout, self.options)
            .map_err(|error| match error {
                Error::TooManyWords { text, max } => Error::TooManyWords {
                    text: first + text,
                    max,
                },
                error => error,
            });
        self.ended |= tagged.is_err();
        Some(tagged)
    }
}
