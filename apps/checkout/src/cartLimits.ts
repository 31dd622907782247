/** The most of one product a cart (and so a checkout) may hold: the server refuses more. */
export const MAX_QUANTITY = 20;

/** The most lines a cart may hold. */
export const MAX_LINES = 20;
