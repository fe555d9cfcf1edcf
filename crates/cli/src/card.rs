//! `nertrain card`: writes a model's card (README.md with Hugging Face metadata) from what its
//! run directory records (through `nertrain-train`).

use std::path::PathBuf;

use clap::Args;
use nertrain_train::{CARD_MARK, model_card};

use crate::{Result, UsageError};

#[derive(Args)]
pub struct CardArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    /// Where to write the card (`-`: stdout); by default README.md in the model directory. A
    /// file already there is replaced only when `nertrain card` wrote it.
    #[arg(long)]
    output: Option<PathBuf>,
}

pub fn run(args: CardArgs) -> Result<()> {
    let card = model_card(&args.model)?;
    let path = match args.output {
        Some(path) if crate::input::is_stdin(&path) => {
            print!("{card}");
            return Ok(());
        }
        Some(path) => path,
        None => args.model.join("README.md"),
    };
    // A card replaces only a card: whatever else is there is someone's own writing.
    let ours = |text: String| text.contains(CARD_MARK);
    if path.exists() && !std::fs::read_to_string(&path).is_ok_and(ours) {
        return Err(UsageError(format!(
            "{}: a file that `nertrain card` did not write; give --output a path of its own \
             to write the card there",
            path.display()
        ))
        .into());
    }
    nertrain_data::write_output(&path, card.as_bytes())?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
