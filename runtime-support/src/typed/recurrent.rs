//! Recurrent layers (LSTM, GRU, RNN) over the float element types.
