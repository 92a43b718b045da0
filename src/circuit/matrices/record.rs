//! Recording a circuit's constraints as sparse matrices, once per key.

use super::*;

/// One matrix while recording: columns of aux variables carry [`AUX_TAG`] until the number of
/// inputs is known.
#[derive(Default)]
struct RowsBuilder {
    row_starts: Vec<u64>,
    tagged_columns: Vec<u32>,
    coefficients: Vec<u32>,
}

impl RowsBuilder {
    pub(super) fn new() -> Self {
        RowsBuilder { row_starts: vec![0], ..Default::default() }
    }

    fn end_row(&mut self) {
        self.row_starts.push(self.tagged_columns.len() as u64);
    }

    /// The finished matrix: aux columns moved behind the inputs.
    fn finish(self, num_inputs: u32) -> SparseMatrix {
        let mut columns = self.tagged_columns;
        columns.par_iter_mut().for_each(|column| {
            if *column & AUX_TAG != 0 {
                *column = num_inputs + (*column & !AUX_TAG);
            }
        });
        SparseMatrix { row_starts: self.row_starts, columns, coefficients: self.coefficients }
    }
}

/// The `ConstraintSystem` that records the matrices.
pub(super) struct Recorder {
    num_inputs: usize,
    num_aux: usize,
    a: RowsBuilder,
    b: RowsBuilder,
    c: RowsBuilder,
    table: Vec<Scalar>,
    /// A coefficient's canonical bytes → its index in `table`.
    table_index: HashMap<[u8; 32], u32>,
    /// An error that `enforce` cannot return (it has no `Result`), reported after synthesis.
    deferred: Option<Error>,
    /// The variables' values (inputs, aux), when the recording also synthesizes the witness.
    pub(super) values: Option<(Vec<Scalar>, Vec<Scalar>)>,
}

impl Recorder {
    pub(super) fn new() -> Self {
        Recorder {
            values: None,
            num_inputs: 0,
            num_aux: 0,
            a: RowsBuilder::new(),
            b: RowsBuilder::new(),
            c: RowsBuilder::new(),
            // ONE is entry 0, so evaluation knows it without comparing scalars.
            table: vec![Scalar::ONE],
            table_index: HashMap::from([(Scalar::ONE.to_repr(), 0)]),
            deferred: None,
        }
    }

    fn defer(&mut self, error: impl FnOnce() -> Error) {
        self.deferred.get_or_insert_with(error);
    }

    /// `coeff`'s index in the table, adding it if it is new.
    fn intern(&mut self, coeff: &Scalar) -> u32 {
        if *coeff == Scalar::ONE {
            return 0;
        }
        let next = self.table.len();
        let Ok(next) = u32::try_from(next) else {
            self.defer(|| Error::Synthesis("the circuit has more than 2^32 distinct coefficients".into()));
            return 0;
        };
        let table = &mut self.table;
        *self.table_index.entry(coeff.to_repr()).or_insert_with(|| {
            table.push(*coeff);
            next
        })
    }

    /// Appends `lc` as the next row of the matrix `which` (0, 1, 2 for A, B, C).
    fn record_row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        // C ends its row last, so its row count is this constraint's index for all three.
        let constraint = self.c.row_starts.len() - 1;
        let inputs = lc.iter_inputs().map(|(i, coeff)| (Index::Input(*i), coeff));
        let aux = lc.iter_aux().map(|(i, coeff)| (Index::Aux(*i), coeff));
        for (index, coeff) in inputs.chain(aux) {
            // bellperson skips zero coefficients, for the value and for the density alike.
            if coeff.is_zero_vartime() {
                continue;
            }
            let (allocated, tag, i) = match index {
                Index::Input(i) => (self.num_inputs, 0, i),
                Index::Aux(i) => (self.num_aux, AUX_TAG, i),
            };
            if i >= allocated {
                self.defer(|| {
                    Error::Synthesis(format!("constraint {constraint} uses {index:?}, which was never allocated"))
                });
                continue;
            }
            if i >= MAX_VARIABLES_OF_A_KIND {
                // Allocated beyond what a column can tag: `alloc` deferred that error already.
                continue;
            }
            // `i < MAX_VARIABLES_OF_A_KIND`, so the tag bit is free.
            let k = self.intern(coeff);
            let rows = match which {
                0 => &mut self.a,
                1 => &mut self.b,
                _ => &mut self.c,
            };
            rows.tagged_columns.push(tag | i as u32);
            rows.coefficients.push(k);
        }
        match which {
            0 => self.a.end_row(),
            1 => self.b.end_row(),
            _ => self.c.end_row(),
        }
    }

    /// Appends the input constraints and builds the matrices.
    pub(super) fn finish(mut self) -> Result<ConstraintMatrices> {
        if let Some(error) = self.deferred.take() {
            return Err(error);
        }
        // bellperson's `input * 0 = 0` per input (see `synthesize.rs`): A holds the input with
        // coefficient ONE (table entry 0), B and C are empty.
        for i in 0..self.num_inputs {
            self.a.tagged_columns.push(i as u32);
            self.a.coefficients.push(0);
            self.a.end_row();
            self.b.end_row();
            self.c.end_row();
        }
        let num_constraints = self.a.row_starts.len() - 1;
        if num_constraints < Witness::MIN_CONSTRAINTS {
            return Err(Error::EmptyCircuit);
        }
        if self.num_inputs + self.num_aux > u32::MAX as usize {
            return Err(Error::Synthesis(format!(
                "{} inputs and {} aux variables do not fit the matrices' 32-bit columns",
                self.num_inputs, self.num_aux
            )));
        }
        let num_inputs = self.num_inputs as u32;
        let matrices = [self.a.finish(num_inputs), self.b.finish(num_inputs), self.c.finish(num_inputs)];
        Ok(ConstraintMatrices::from_parts(self.num_inputs, self.num_aux, matrices, self.table))
    }

    /// Counts one more variable of a kind; beyond what a column can tag, synthesis fails.
    fn next_variable(&mut self, aux: bool) -> Variable {
        let count = if aux { &mut self.num_aux } else { &mut self.num_inputs };
        let index = *count;
        *count += 1;
        if index >= MAX_VARIABLES_OF_A_KIND {
            let kind = if aux { "aux" } else { "input" };
            self.defer(|| Error::Synthesis(format!("the constraint matrices hold at most 2^31 {kind} variables")));
        }
        Variable::new_unchecked(if aux { Index::Aux(index) } else { Index::Input(index) })
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // The value is not needed, as in bellperson's key generation, unless the recording
        // also yields the witness.
        if let Some((_, aux)) = &mut self.values {
            aux.push(value()?);
        }
        Ok(self.next_variable(true))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if let Some((inputs, _)) = &mut self.values {
            inputs.push(value()?);
        }
        Ok(self.next_variable(false))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.record_row(0, &a(LinearCombination::zero()));
        self.record_row(1, &b(LinearCombination::zero()));
        self.record_row(2, &c(LinearCombination::zero()));
    }

    fn push_namespace<NR, N>(&mut self, _name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
